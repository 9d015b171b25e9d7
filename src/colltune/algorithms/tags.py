"""Message tags used by the algorithms (on a private duplicate of the user's communicator).

Data and control messages between the same two ranks get different tags so that
MPI matching can never pair a zero-byte signal with a data message.
"""

#: Payload.
TAG_DATA = 0
#: Rendezvous ready-to-send (zero bytes).
TAG_RTS = 1
#: Rendezvous clear-to-send (zero bytes).
TAG_CTS = 2
#: Permission or start signal: a gather grant, a coordinated-gather start, a barrier release (zero bytes).
TAG_SIGNAL = 3
