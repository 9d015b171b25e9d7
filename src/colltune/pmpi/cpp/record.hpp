// Record mode (COLLTUNE_RECORD=DIR): what every rank's program called, when, with what sizes and
// peers, written at MPI_Finalize to DIR/rank-<world rank>.jsonl for `colltune trace-to-goal`.
// See record.cpp.

#pragma once

#include "mpi_raw.hpp"

namespace colltune::pmpi {

// Whether COLLTUNE_RECORD names a directory (read once), on a library of a known ABI.
bool recording_on();
inline bool recording() {
  static const bool on = recording_on();
  return on;
}

// One intercepted collective, timed when recording: made where the call starts, it records the
// call (and what ran it, ``last_algorithm``) where it ends.  ``count`` elements of ``datatype``
// are the call's block.
class CollectiveRecord {
 public:
  CollectiveRecord(int coll, Raw comm, int root, int count, Raw datatype) {
    if (recording() && !inside) start(coll, comm, root, count, datatype);
  }
  ~CollectiveRecord() {
    if (active_) finish();
  }
  CollectiveRecord(const CollectiveRecord &) = delete;
  CollectiveRecord &operator=(const CollectiveRecord &) = delete;

 private:
  void start(int coll, Raw comm, int root, int count, Raw datatype);
  void finish();
  bool active_ = false;
  int coll_ = 0, root_ = 0;
  Raw comm_ = 0;
  long long bytes_ = 0;
  double t0_ = 0;
};

// Where record mode keeps a communicator's id (-1 until it has one), in the state the library
// keeps for the communicator (interpose.cpp); null where it has none.
long *record_slot(Raw comm);

// The parameters (JSON text) of the algorithm that ran this thread's last intercepted call.
inline COLLTUNE_TLS const char *last_params = "{}";

}  // namespace colltune::pmpi
