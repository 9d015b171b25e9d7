// The event-driven core of colltune's simulator.
//
// It times a columnar schedule (the arrays of colltune.schedule.Schedule, read in place through
// nanobind without copying) on a network given as per-message cost columns, computed in Python
// from a model's parameters (colltune.sim.network):
//
//   send of message i at time t: needs the sender's CPU and send NIC free; the CPU is then busy
//     until t + cs[i], the NIC until t + gs[i];
//   fixed-latency transport: the message reaches the receiver at t + lat[i];
//   flow transport (a topology is given): a flow of vol[i] units joins at t the stream from
//     sender to receiver (one per pair, carrying its flows in order), which shares each link's
//     capacity with the other streams on it (an equal split taking the minimum over the path,
//     paper 001 eq. 6-7, or max-min fairness), and the message arrives lat[i] after its flow ends
//     (plus rto[i], a retransmission penalty); a flow of at most fifo_bytes units (TCP's window:
//     the whole message enters the sender's queue when it is written) joins only when the
//     sender's previous such flows would have left its host at the host link's capacity, so that
//     a sender's small messages leave in the order they were posted, as from a NIC's FIFO
//     queue, instead of sharing its link from the start; a link with a bucket (a token bucket's
//     depth, bytes, e.g. tc tbf's burst) refills it at its capacity while no flow crosses it, and
//     a flow that starts moving when every link of its path holds tokens passes that many of its
//     bytes at once (the least over the path), taking them from each; while the receiver's host
//     sends (a flow climbs from it), a stream can use the duplex table's share, at the bytes of
//     its run (its messages back to back, none idle for more than warm_gap, through its first
//     flow), of its share of the link into that host (with n streams into that host, the share
//     regains many_recover min(1, ln n / ln many_streams) of the table's shortfall), and while a
//     link between two switches carries data the other way, trunk_duplex[i] of its share of that
//     link, i its first flow
//     (TCP's acknowledgements queue behind that data; colltune.sim.topology);
//   at arrival ta the message waits for the receiver's CPU and receive NIC; processed at t' it
//     keeps the CPU busy until t' + cr[i] and the NIC until t' + gr[i];
//   a receive is posted at no cost and completes when its message has been processed (MPI
//     matching: by source and tag, in posting order; a receive may name source or tag -1, the
//     wildcards of GOAL, MPI_ANY_SOURCE and MPI_ANY_TAG);
//   an eager send completes when it starts, a rendezvous one (rdv[i]) once its receive is matched
//     and a flow-transported one once its flow has ended; an acknowledged one (ack[i] >= 0) also
//     not before ack[i] after its message was processed (the receiver's acknowledgement coming
//     back, as MPICH's sends above a few hundred bytes over libfabric's tcp provider complete);
//   a local op (copy, reduction, delay) occupies the CPU for cost[i];
//   with shared cores (cores > 0: the hosts of an emulated cluster run on one machine's cores),
//   every send i and its message processed also need one of those cores for core_cost[i], and a
//   copy or reduction for cost[i]: such an item fires only when a core is free (the earliest free
//   one takes it), so a message waits only when more items want the cores than there are cores,
//   and a lone message costs what the network model says
//   (colltune.sim.topology.Topology.message_cpu_of); a delay takes none: it is time that passes
//   on its rank (GOAL's calc, a recorded run's time outside MPI, which already holds whatever
//   sharing that run met).
//
// With cs = o + (s-1)O, gs = g + (s-1)G, lat = o + L, cr = o + max((s-1)O, (s-1)G) and
// gr = g + (s-1)G these are the rules of LogGOPSim (Hoefler, Schneider, Lumsdaine 2010).  As in
// LogGOPSim, an op whose dependencies are met gets as ready time the time its host's CPU (and,
// for a send, its send NIC) is next free, and when several ops compete for the same resource the
// one that became ready first (by a global insertion counter) goes first.  Unlike LogGOPSim,
// waiting ops are kept in per-host queues instead of being re-queued in the global heap, and
// messages are matched through a hash table: both are what keep a million messages fast.
//
// Times are doubles: without a topology whole ticks (colltune.sim.engine.TICKS to the second),
// every sum exact below 2^53 as in an integer clock; with one, seconds.  The run is deterministic:
// single-threaded, every tie broken by the insertion counter.

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <deque>
#include <limits>
#include <queue>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

namespace nb = nanobind;

template <typename T>
using In = nb::ndarray<const T, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
template <typename T>
using Out = nb::ndarray<T, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

namespace {

constexpr int8_t SEND = 0, RECV = 1, DELAY = 4;  // colltune.schedule.Kind; every other kind is local
constexpr double INF = std::numeric_limits<double>::infinity();

// A priority queue (smallest first by Less) kept as a FIFO of items pushed in order and a heap of
// the others, merged as they are taken: the same order as one heap, but most items (a receive
// posted now, a host's sends freed together, a message arriving after the one before) come in
// order and cost O(1) instead of O(log n).  That is what keeps a million messages fast.
template <typename T, typename Less>
class MergeQueue {
 public:
  bool empty() const { return fifo.empty() && heap.empty(); }
  void push(const T& x) {
    if (fifo.empty() || !Less()(x, fifo.back())) {
      fifo.push_back(x);
    } else {
      heap.push_back(x);
      std::push_heap(heap.begin(), heap.end(), Greater());
    }
  }
  const T& top() const { return from_fifo() ? fifo.front() : heap.front(); }
  void pop() {
    if (from_fifo()) {
      fifo.pop_front();
    } else {
      std::pop_heap(heap.begin(), heap.end(), Greater());
      heap.pop_back();
    }
  }

 private:
  struct Greater {
    bool operator()(const T& a, const T& b) const { return Less()(b, a); }
  };
  bool from_fifo() const { return !fifo.empty() && (heap.empty() || !Less()(heap.front(), fifo.front())); }
  std::deque<T> fifo;
  std::vector<T> heap;
};

struct Item {  // an op or message waiting in a host queue
  double ready;
  uint64_t ts;
  int64_t id;
};
struct ByReady {  // earlier ready first, then older
  bool operator()(const Item& a, const Item& b) const {
    return a.ready != b.ready ? a.ready < b.ready : a.ts < b.ts;
  }
};
struct ByTs {  // older first
  bool operator()(const Item& a, const Item& b) const { return a.ts < b.ts; }
};

// Items of one class (sends, messages, copies and reductions, or delays) of one host.  An item
// can fire once its ready time has come and the class's resources are free at R; among the items
// ready by R the oldest (smallest ts) fires first, otherwise the earliest ready one.
struct ClassQueue {
  MergeQueue<Item, ByReady> future;
  MergeQueue<Item, ByTs> avail;

  bool empty() const { return future.empty() && avail.empty(); }
  // (time, ts) at which the next item would fire if the resources are free from R on.
  bool candidate(double R, double& time, uint64_t& ts) {
    while (!future.empty() && future.top().ready <= R) {
      avail.push(future.top());
      future.pop();
    }
    if (!avail.empty()) {
      time = R;
      ts = avail.top().ts;
      return true;
    }
    if (!future.empty()) {
      time = future.top().ready;
      ts = future.top().ts;
      return true;
    }
    return false;
  }
  Item pop() {  // the item candidate() named
    if (!avail.empty()) {
      Item it = avail.top();
      avail.pop();
      return it;
    }
    Item it = future.top();
    future.pop();
    return it;
  }
};

struct Host {
  double cpu = 0, nic_s = 0, nic_r = 0;
  ClassQueue sends, msgs, locals, delays;
  uint64_t version = 0;  // of its one valid EV_HOST event
  bool queued = false;   // that event is in the queue, for (at, at_ts)
  double at = 0;
  uint64_t at_ts = 0;
};

enum EventType : uint8_t { EV_HOST, EV_RECV, EV_FLOW, EV_SEND_FLOW_DONE, EV_ARRIVE, EV_FIFO_FLOW, EV_ACK };
struct Event {  // 24 bytes: a run queues millions of them
  double time;
  uint64_t ts;
  uint32_t what;     // the type in the top 3 bits, the op, host or stream below (fewer than 2^29)
  uint32_t version;  // of the host or stream, for the events that can go stale
  Event(double t, uint64_t s, EventType type, int64_t a, uint64_t v)
      : time(t), ts(s), what(uint32_t(type) << 29 | uint32_t(a)), version(uint32_t(v)) {}
  EventType type() const { return EventType(what >> 29); }
  int64_t a() const { return int64_t(what & ((1u << 29) - 1)); }
};
struct EventOrder {  // earlier first, then older
  bool operator()(const Event& x, const Event& y) const {
    return x.time != y.time ? x.time < y.time : x.ts < y.ts;
  }
};


// uint64 keys (all but ~0) to values V, open addressing with linear probing: a key and its value
// are read together (one cache miss), and no key allocates anything of its own.
template <typename V>
class FlatMap {
 public:
  explicit FlatMap(size_t expected = 0) { reset(capacity_for(expected)); }
  // The value of key, added (V{}) if new.
  V& at(uint64_t key) {
    size_t s = find(key);
    if (slots[s].key == key) return slots[s].value;
    if ((used + 1) * 2 > slots.size()) {
      grow();
      s = find(key);
    }
    ++used;
    slots[s].key = key;
    return slots[s].value;
  }
  template <typename F>
  void each(F f) const {  // f(value) for every key
    for (const Slot& s : slots)
      if (s.key != EMPTY) f(s.value);
  }

 private:
  static constexpr uint64_t EMPTY = ~uint64_t(0);
  struct Slot {
    uint64_t key = EMPTY;
    V value{};
  };
  static size_t capacity_for(size_t keys) {
    size_t cap = 16;
    while (cap < 2 * keys + 16) cap <<= 1;
    return cap;
  }
  size_t find(uint64_t key) const {  // its slot, or the empty one where it would go
    size_t s = size_t((key * 0x9E3779B97F4A7C15ULL) >> 17) & mask;
    while (slots[s].key != EMPTY && slots[s].key != key) s = (s + 1) & mask;
    return s;
  }
  void reset(size_t cap) {
    slots.assign(cap, Slot{});
    mask = cap - 1;
    used = 0;
  }
  void grow() {
    std::vector<Slot> old;
    old.swap(slots);
    reset(old.size() * 2);
    for (const Slot& s : old)
      if (s.key != EMPTY) {
        slots[find(s.key)] = s;
        ++used;
      }
  }
  std::vector<Slot> slots;
  size_t mask = 0, used = 0;
};

// FIFOs of (end, op) entries drawn from one pool, linked by index, with freed entries reused:
// the matcher's queues and the streams' flows, millions of short FIFOs that allocate nothing of
// their own.
struct PoolEntry {
  double end;    // a message's: when its receive would be complete; a flow's: its progress at its end
  int64_t op;    // a receive op, or the send op of a message or flow
  int64_t next;  // the next entry of its FIFO, or of the free list; -1 at the tail
};
class EntryPool {
 public:
  int64_t take(double end, int64_t op) {
    if (spare < 0) {
      entries.push_back(PoolEntry{end, op, -1});
      return int64_t(entries.size()) - 1;
    }
    int64_t at = spare;
    spare = entries[at].next;
    entries[at] = PoolEntry{end, op, -1};
    return at;
  }
  void give_back(int64_t at) {
    entries[at].next = spare;
    spare = at;
  }
  PoolEntry& operator[](int64_t at) { return entries[at]; }
  const PoolEntry& operator[](int64_t at) const { return entries[at]; }

 private:
  std::vector<PoolEntry> entries;
  int64_t spare = -1;
};
// One FIFO in 8 bytes, with one bit to spare for its owner (the matcher: whether it holds
// receives).  Entries number fewer than 2^31 (ops do).
struct Fifo {
  int32_t head = -1;       // -1: empty
  uint32_t tail_flag = 0;  // its last entry; the owner's bit on top
  bool empty() const { return head < 0; }
  bool flag() const { return tail_flag >> 31; }
  const PoolEntry& front(const EntryPool& pool) const { return pool[head]; }
  void push(EntryPool& pool, double end, int64_t op, bool flag = false) {
    int64_t at = pool.take(end, op);
    if (head >= 0) {
      pool[tail_flag & 0x7fffffffu].next = at;
    } else {
      head = int32_t(at);
    }
    tail_flag = uint32_t(at) | (uint32_t(flag) << 31);
  }
  PoolEntry pop(EntryPool& pool) {
    PoolEntry first = pool[head];
    pool.give_back(head);
    head = int32_t(first.next);
    return first;
  }
};

// MPI matching by (receiver, sender, tag), in posting order: one FIFO per key, holding either
// posted receives or processed messages that no receive has asked for yet (never both: a new
// entry of the other sort matches at once).
class Matcher {
 public:
  using Entry = PoolEntry;
  explicit Matcher(int64_t expected) : fifos(size_t(expected)) {}
  // Take the oldest entry of the other sort for `key`, or queue this one; true when matched.
  bool match_or_queue(uint64_t key, bool recv, int64_t op, double end, Entry& matched) {
    Fifo& f = fifos.at(key);
    if (!f.empty() && f.flag() != recv) {
      matched = f.pop(pool);
      return true;
    }
    f.push(pool, end, op, recv);
    return false;
  }
  int64_t waiting_messages() const {
    int64_t count = 0;
    fifos.each([&](const Fifo& f) {
      if (!f.empty() && !f.flag())
        for (int64_t e = f.head; e >= 0; e = pool[e].next) ++count;
    });
    return count;
  }

 private:
  FlatMap<Fifo> fifos;
  EntryPool pool;
};

// MPI matching at a rank that posts wildcard receives (source or tag -1, MPI_ANY_SOURCE /
// MPI_ANY_TAG): a message takes the oldest posted receive it fits, a receive the oldest waiting
// message it fits.  Every message and receive of such a rank goes through here, so that exact and
// wildcard receives keep their posting order; the search is linear, as in LogGOPSim's queues.
class OrderedMatcher {
 public:
  struct Posted {
    int64_t op;
    int32_t src, tag;  // -1: any
  };
  struct Waiting {
    int64_t op;
    int32_t src, tag;
    double end;  // when its receive would be complete
  };
  // A processed message from `src` with `tag`: the receive it completes, or -1 (then it waits).
  int64_t message(int64_t op, int32_t src, int32_t tag, double end) {
    for (auto it = posted.begin(); it != posted.end(); ++it)
      if ((it->src < 0 || it->src == src) && (it->tag < 0 || it->tag == tag)) {
        int64_t recv = it->op;
        posted.erase(it);
        return recv;
      }
    waiting.push_back(Waiting{op, src, tag, end});
    return -1;
  }
  // A posted receive: true and the message it takes, or false (then it waits).
  bool receive(int64_t op, int32_t src, int32_t tag, Waiting& msg) {
    for (auto it = waiting.begin(); it != waiting.end(); ++it)
      if ((src < 0 || it->src == src) && (tag < 0 || it->tag == tag)) {
        msg = *it;
        waiting.erase(it);
        return true;
      }
    posted.push_back(Posted{op, src, tag});
    return false;
  }
  int64_t waiting_messages() const { return int64_t(waiting.size()); }

 private:
  std::deque<Posted> posted;
  std::deque<Waiting> waiting;
};


// The flows of one (sender, receiver) pair form one stream, as MPI's messages between two ranks
// share one connection (a TCP socket, a queue pair): the stream takes one share of every link it
// crosses, and carries its messages one after the other, in the order they were sent.
struct FlowGroup {
  int32_t src, dst;
  int64_t path_lo, path_hi;  // links in Engine::path_links
  int64_t active = 0;        // messages in the stream
  double w_ref = 0, t_ref = 0, rate = 0;  // bytes carried: w_ref at t_ref, growing at rate
  double tail = 0;                        // bytes carried when the last message queued is through
  double last_end = -INFINITY;            // when the stream last ran out of messages
  double run = 0;  // units of its run (messages none idle over Engine::warm_gap) through its first flow
  uint64_t version = 0;
  Fifo flows;  // (progress at which the flow is complete, send op) in Engine::flow_pool, in the order
              // they were sent, which is the order they complete (each ends where the one before it
              // ended, plus its bytes)
  double progress(double t) const { return w_ref + rate * (t - t_ref); }
};

class Engine {
 public:
  // schedule
  int64_t P = 0, n = 0;
  const int8_t* kind;
  const int32_t *rank, *peer, *tag;
  const int64_t* rank_ptr;
  // costs: per op, or per class of ops that cost the same (cls: each op's class; none: per op)
  const double *cost, *cs, *gs, *lat, *cr, *gr, *vol, *rto;
  const int32_t* cls = nullptr;
  int64_t c(int64_t i) const { return cls ? cls[i] : i; }  // where op i's costs are
  // The share of the link into a receiving host that sends, by the units of a stream's run: at
  // duplex_at (log2 units, ascending), interpolated in log size, clamped at the ends (as
  // colltune.sim.topology._by_size); none: the whole share.
  std::vector<double> duplex_at, duplex_share;
  double warm_gap = 0;  // s: a stream idle no longer than this continues its run (keeps its window)
  // With several streams into one host (many_streams > 1): the part of the duplex table's
  // shortfall they recover (colltune.sim.topology.Topology.duplex_streams); 0: none.
  double many_streams = 0, many_recover = 0;
  const double* trunk_duplex = nullptr;  // per send: its share of a switch's link carrying data both ways
  const uint8_t* rdv;
  const double* ack = nullptr;  // per send: s from its message processed to its completion; < 0: none
  bool flows_on = false, maxmin = false;
  double fifo_bytes = 0;  // flows of at most this many units leave their sender one at a time
  int64_t cores = 0;                  // processor cores all hosts share; 0: each host its own
  const double* core_cost = nullptr;  // per send: what it, and its message processed, take of a core
  std::priority_queue<double, std::vector<double>, std::greater<double>> core_free;  // when each is free
  // outputs
  double *start, *end, *flow_start, *flow_end, *flow_rate, *completion;

  // dependencies, reversed: for op j, the ops waiting on its start / on its completion
  std::vector<int64_t> rev_ptr, rev_idx;
  bool in_order = false;  // every op waits for the start of its rank's op before it
  std::vector<uint8_t> rev_start;
  std::vector<int32_t> pending;
  std::vector<uint8_t> started, done;
  std::vector<uint8_t> send_wait;  // what a send still waits for before it completes

  std::vector<Host> hosts;
  MergeQueue<Event, EventOrder> events;
  uint64_t counter = 0;
  double now = 0;
  uint64_t processed = 0;
  Matcher* match = nullptr;
  std::vector<int32_t> ordered_of;          // per rank: its OrderedMatcher, or -1 (exact matching)
  std::vector<OrderedMatcher> ordered;
  std::vector<int64_t> freed, batch, touched;

  // topology and flows
  std::vector<int32_t> parent, depth;
  std::vector<uint8_t> trunk;  // per node: 1 if its link joins two switches
  std::vector<double> capacity;  // per directed link: 2 * node (up to the parent), 2 * node + 1 (down)
  std::vector<double> bucket, tokens, idle_since;  // per directed link: depth, tokens at idle_since
  std::vector<int64_t> link_count;
  std::vector<uint64_t> link_stamp;
  std::vector<std::vector<int32_t>> link_groups;
  std::vector<int32_t> path_links;
  std::vector<FlowGroup> groups;
  EntryPool flow_pool;             // the entries of every stream's FIFO
  std::vector<int32_t> path_down;  // group_for's scratch: a path's links down from the top
  FlatMap<int32_t> group_of;  // (sender * P + receiver) -> its stream + 1 (0: none yet)
  std::vector<int32_t> dirty_links, dirty_groups;
  std::vector<uint64_t> group_stamp;
  uint64_t stamp = 1;  // marks links and groups touched since the last rate update
  int32_t host_node0 = 0;
  const int32_t* host_node = nullptr;
  std::vector<double> fifo_free;  // per rank: when its small flows posted so far have left its host

  // exact for P < 2^16 and 32-bit tags (the Python side checks P)
  uint64_t match_key(int64_t dst, int64_t src, int64_t t) const {
    return (uint64_t(dst) * uint64_t(P) + uint64_t(src)) * 0x100000001ULL + uint64_t(uint32_t(t));
  }


  void push(double time, EventType type, int64_t a, uint64_t version = 0) {
    events.push(Event{time, counter++, type, a, version});
  }

  // -- dependencies ------------------------------------------------------------------------------
  // The explicit dependencies, reversed (rev_*: none kept when there are none); with in_order,
  // each op of a rank but its first also waits for the start of the op before it, which satisfy()
  // applies without storing it.
  void build_deps(const int64_t* dep_ptr, const int64_t* dep_idx, const bool* dep_start, bool posting_order) {
    in_order = posting_order;
    pending.assign(n, 0);
    if (in_order)
      for (int64_t i = 0; i < n; ++i) pending[i] = i > rank_ptr[rank[i]];
    if (dep_ptr[n] == 0) return;
    rev_ptr.assign(n + 1, 0);
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t k = dep_ptr[i]; k < dep_ptr[i + 1]; ++k) {
        int64_t j = dep_idx[k];
        if (j < 0 || j >= n || rank[j] != rank[i]) throw std::invalid_argument("dependency outside the op's rank");
        ++rev_ptr[j + 1];
        ++pending[i];
      }
    }
    for (int64_t j = 0; j < n; ++j) rev_ptr[j + 1] += rev_ptr[j];
    rev_idx.assign(rev_ptr[n], 0);
    rev_start.assign(rev_ptr[n], 0);
    std::vector<int64_t> fill(rev_ptr.begin(), rev_ptr.end() - 1);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t k = dep_ptr[i]; k < dep_ptr[i + 1]; ++k) {
        int64_t j = dep_idx[k], at = fill[j]++;
        rev_idx[at] = i;
        rev_start[at] = dep_start[k];
      }
  }

  // Op j started (on_start) or completed: its dependents, in op order, one fewer to wait for.
  void satisfy(int64_t j, bool on_start) {
    bool next = on_start && in_order && j + 1 < rank_ptr[rank[j] + 1];  // op j + 1 waits for j's start
    if (!rev_ptr.empty())
      for (int64_t k = rev_ptr[j]; k < rev_ptr[j + 1]; ++k) {
        int64_t i = rev_idx[k];
        if (next && i > j + 1) {
          release_one(j + 1);
          next = false;
        }
        if (bool(rev_start[k]) == on_start) release_one(i);
      }
    if (next) release_one(j + 1);
  }
  void release_one(int64_t i) {
    if (--pending[i] == 0) freed.push_back(i);
  }
  void mark_started(int64_t i, double t) {
    started[i] = 1;
    start[i] = t;
    satisfy(i, true);
  }
  void mark_done(int64_t i, double t_end) {
    done[i] = 1;
    end[i] = t_end;
    satisfy(i, false);
  }

  // Free ops become ready when their host's resources are next free, in LogGOPSim's order:
  // sends, then receives, then local ops.
  void release() {
    if (freed.empty()) return;
    auto rank_of = [](int8_t k) { return k == SEND ? 0 : k == RECV ? 1 : 2; };
    if (freed.size() > 1)
      std::stable_sort(freed.begin(), freed.end(),
                       [&](int64_t a, int64_t b) { return rank_of(kind[a]) < rank_of(kind[b]); });
    batch.swap(freed);
    freed.clear();
    touched.clear();
    for (int64_t i : batch) {
      Host& h = hosts[rank[i]];
      double ready = std::max(now, h.cpu);
      if (kind[i] == SEND) {
        h.sends.future.push(Item{std::max(ready, h.nic_s), counter++, i});
      } else if (kind[i] == RECV) {
        push(ready, EV_RECV, i);
        continue;
      } else {
        (kind[i] == DELAY ? h.delays : h.locals).future.push(Item{ready, counter++, i});
      }
      touched.push_back(rank[i]);
    }
    std::sort(touched.begin(), touched.end());
    touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
    batch.clear();
    for (int64_t h : touched) schedule_host(h);
  }

  // -- hosts ---------------------------------------------------------------------------------------
  // The class queue of host h whose item fires next, and when: the earliest (time, ts) over
  // sends (CPU and send NIC), messages (CPU and receive NIC), copies and reductions (CPU) and
  // delays (the rank's CPU, no shared core).
  ClassQueue* next_item(Host& h, double& best, uint64_t& best_ts) {
    ClassQueue* queues[4] = {&h.sends, &h.msgs, &h.locals, &h.delays};
    const double core = cores > 0 ? core_free.top() : 0.0;
    double free_at[4] = {std::max({h.cpu, h.nic_s, core}), std::max({h.cpu, h.nic_r, core}),
                         std::max(h.cpu, core), h.cpu};
    ClassQueue* which = nullptr;
    best = INF;
    best_ts = 0;
    for (int c = 0; c < 4; ++c) {
      double t;
      uint64_t ts;
      if (queues[c]->candidate(free_at[c], t, ts) && (t < best || (t == best && ts < best_ts))) {
        best = t;
        best_ts = ts;
        which = queues[c];
      }
    }
    return which;
  }

  // Queue host hi's next item; an event already queued for the same (time, ts) stands.
  void schedule_host(int64_t hi) {
    Host& h = hosts[hi];
    double best;
    uint64_t best_ts;
    if (!next_item(h, best, best_ts)) {
      ++h.version;
      h.queued = false;
      return;
    }
    best = std::max(best, now);
    if (h.queued && h.at == best && h.at_ts == best_ts) return;
    ++h.version;
    h.queued = true;
    h.at = best;
    h.at_ts = best_ts;
    events.push(Event{best, best_ts, EV_HOST, hi, h.version});
  }

  void fire_host(int64_t hi) {
    Host& h = hosts[hi];
    double best;
    uint64_t best_ts;
    // The item schedule_host named, unless another host has since taken the shared core it was to
    // have: then the caller schedules this host again for when a core is free.
    ClassQueue* which = next_item(h, best, best_ts);
    if (best > now) return;
    Item it = which->pop();
    if (which == &h.sends) {
      fire_send(hi, it.id);
    } else if (which == &h.msgs) {
      fire_message(hi, it.id);
    } else {
      int64_t i = it.id;
      if (which == &h.locals) take_core(cost[c(i)]);
      h.cpu = now + cost[c(i)];
      mark_started(i, now);
      mark_done(i, now + cost[c(i)]);
    }
  }

  void take_core(double work) {  // the earliest free shared core, busy from now for work
    if (cores == 0 || work <= 0) return;
    core_free.pop();
    core_free.push(now + work);
  }

  void fire_send(int64_t hi, int64_t i) {
    Host& h = hosts[hi];
    if (cores > 0) take_core(core_cost[i]);
    h.cpu = now + cs[c(i)];
    h.nic_s = now + gs[c(i)];
    end[i] = now + cs[c(i)];
    mark_started(i, now);
    send_wait[i] = uint8_t(rdv[c(i)] ? 1 : 0) + uint8_t(flows_on ? 1 : 0) + uint8_t(ack && ack[i] >= 0 ? 1 : 0);
    if (flows_on) {
      start_flow(i);
    } else {
      arrive(i, now + lat[c(i)]);
    }
    if (!done[i] && send_wait[i] == 0) mark_done(i, end[i]);
  }

  void arrive(int64_t i, double t) {
    Host& d = hosts[peer[i]];
    d.msgs.future.push(Item{t, counter++, i});
    schedule_host(peer[i]);
  }

  void send_progress(int64_t i, double t) {  // one of the things send i waits for happened at t
    end[i] = std::max(end[i], t);
    if (--send_wait[i] == 0) mark_done(i, end[i]);
  }

  void rendezvous_matched(int64_t i) {
    Host& s = hosts[rank[i]];
    s.cpu = std::max(s.cpu, now);
    s.nic_s = std::max(s.nic_s, now);
    send_progress(i, now);
    schedule_host(rank[i]);
  }

  void fire_message(int64_t hi, int64_t i) {
    Host& h = hosts[hi];
    if (cores > 0) take_core(core_cost[i]);
    h.cpu = now + cr[c(i)];
    h.nic_r = now + gr[c(i)];
    if (ack && ack[i] >= 0) push(now + ack[i], EV_ACK, i);
    int64_t recv = -1;
    if (ordered_of[hi] >= 0) {
      recv = ordered[ordered_of[hi]].message(i, rank[i], tag[i], now + cr[c(i)]);
    } else {
      Matcher::Entry entry;
      if (match->match_or_queue(match_key(hi, rank[i], tag[i]), false, i, now + cr[c(i)], entry)) recv = entry.op;
    }
    if (recv >= 0) {
      mark_done(recv, now + cr[c(i)]);
      if (rdv[c(i)]) rendezvous_matched(i);
    }
  }

  void post_recv(int64_t j) {
    mark_started(j, now);
    int64_t send = -1;
    double ready = 0;
    if (ordered_of[rank[j]] >= 0) {
      OrderedMatcher::Waiting msg;
      if (ordered[ordered_of[rank[j]]].receive(j, peer[j], tag[j], msg)) {
        send = msg.op;
        ready = msg.end;
      }
    } else {
      Matcher::Entry msg;
      if (match->match_or_queue(match_key(rank[j], peer[j], tag[j]), true, j, 0.0, msg)) {
        send = msg.op;
        ready = msg.end;
      }
    }
    if (send >= 0) {
      mark_done(j, std::max(now, ready));
      if (rdv[c(send)]) rendezvous_matched(send);
    }
  }

  // Give every rank that posts a wildcard receive an OrderedMatcher.
  void set_matching(const int8_t* kinds) {
    ordered_of.assign(P, -1);
    for (int64_t i = 0; i < n; ++i)
      if (kinds[i] == RECV && (peer[i] < 0 || tag[i] < 0) && ordered_of[rank[i]] < 0) {
        ordered_of[rank[i]] = int32_t(ordered.size());
        ordered.emplace_back();
      }
  }
  int64_t waiting_messages() const {
    int64_t count = match->waiting_messages();
    for (const auto& m : ordered) count += m.waiting_messages();
    return count;
  }

  // -- flows ---------------------------------------------------------------------------------------
  void set_topology(const int32_t* par, int64_t nodes, const double* up, const double* down,
                    const double* burst, const int32_t* hnode) {
    parent.assign(par, par + nodes);
    depth.assign(nodes, -1);
    for (int64_t v = 0; v < nodes; ++v) {
      int64_t d = 0, u = v;
      while (parent[u] >= 0) {
        u = parent[u];
        if (++d > nodes) throw std::invalid_argument("the topology's parent links form a cycle");
      }
      depth[v] = int32_t(d);
    }
    capacity.assign(2 * nodes, INF);
    bucket.assign(2 * nodes, 0.0);
    for (int64_t v = 0; v < nodes; ++v) {
      capacity[2 * v] = up[v];
      capacity[2 * v + 1] = down[v];
      bucket[2 * v] = bucket[2 * v + 1] = burst[v];
    }
    tokens = bucket;  // full at the start
    idle_since.assign(2 * nodes, 0.0);
    link_count.assign(2 * nodes, 0);
    link_stamp.assign(2 * nodes, 0);
    link_groups.assign(2 * nodes, {});
    host_node = hnode;
    trunk.assign(nodes, 1);  // a node that is no host and has a parent links two switches
    for (int64_t r = 0; r < P; ++r) trunk[hnode[r]] = 0;
    for (int64_t v = 0; v < nodes; ++v)
      if (parent[v] < 0) trunk[v] = 0;
  }

  int32_t group_for(int64_t src, int64_t dst) {
    uint64_t k = uint64_t(src) * uint64_t(P) + uint64_t(dst);
    int32_t& found = group_of.at(k);
    if (found > 0) return found - 1;
    int32_t g = int32_t(groups.size());
    groups.emplace_back();
    FlowGroup& G = groups.back();
    G.src = int32_t(src);
    G.dst = int32_t(dst);
    G.path_lo = int64_t(path_links.size());
    int32_t a = host_node[src], b = host_node[dst];
    std::vector<int32_t>& down = path_down;
    down.clear();
    while (a != b) {
      if (depth[a] >= depth[b]) {
        path_links.push_back(2 * a);  // up from a
        a = parent[a];
      } else {
        down.push_back(2 * b + 1);  // down into b
        b = parent[b];
      }
    }
    path_links.insert(path_links.end(), down.rbegin(), down.rend());
    G.path_hi = int64_t(path_links.size());
    for (int64_t k2 = G.path_lo; k2 < G.path_hi; ++k2) link_groups[path_links[k2]].push_back(g);
    group_stamp.push_back(0);
    found = g + 1;
    return g;
  }

  void touch_group(int32_t g) {
    if (group_stamp[g] != stamp) {
      group_stamp[g] = stamp;
      dirty_groups.push_back(g);
    }
  }
  void touch_links(const FlowGroup& G) {
    for (int64_t k = G.path_lo; k < G.path_hi; ++k) {
      int32_t l = path_links[k];
      if (link_stamp[l] != stamp) {
        link_stamp[l] = stamp;
        dirty_links.push_back(l);
      }
    }
  }

  void start_flow(int64_t i) {
    if (vol[i] <= 0) {  // nothing to carry: the flow ends as it starts
      flow_start[i] = now;
      flow_end[i] = now;
      flow_rate[i] = INF;
      finish_flow(i);
      return;
    }
    if (vol[i] <= fifo_bytes) {
      int32_t r = rank[i];
      double host_link = capacity[2 * host_node[r]];
      double at = std::max(now, fifo_free[r]);
      if (at > now) {
        fifo_free[r] = at + vol[i] / host_link;
        push(at, EV_FIFO_FLOW, i);
        return;
      }
      double carried = join_flow(i);  // may start this rank's next send, and pace it, first
      fifo_free[r] = std::max(fifo_free[r], now + carried / host_link);
      return;
    }
    join_flow(i);
  }

  // The tokens link l holds now: none while a flow crosses it, else refilled since it went idle.
  double tokens_now(int32_t l) const {
    if (link_count[l] > 0 || bucket[l] <= 0) return 0.0;
    double refill = now > idle_since[l] ? capacity[l] * (now - idle_since[l]) : 0.0;
    return std::min(bucket[l], tokens[l] + refill);
  }

  // Flow i joins its stream now; returns the bytes it carries over the links (its volume less
  // what its path's buckets pass at once).
  double join_flow(int64_t i) {
    int32_t g = group_for(rank[i], peer[i]);
    FlowGroup& G = groups[g];
    double credit = 0;
    if (G.active == 0) {  // the flow moves at once (else when the flow before it in the stream
                          // ends): its path's buckets pass what they hold
      flow_start[i] = now;
      G.run = (now - G.last_end <= warm_gap ? G.run : 0.0) + vol[i];
      credit = vol[i];
      for (int64_t k = G.path_lo; k < G.path_hi; ++k) credit = std::min(credit, tokens_now(path_links[k]));
      if (credit > 0)
        for (int64_t k = G.path_lo; k < G.path_hi; ++k) {
          int32_t l = path_links[k];
          tokens[l] = tokens_now(l) - credit;
          idle_since[l] = now;
        }
    }
    double carry = vol[i] - credit;
    if (carry <= 0) {  // the buckets passed it all
      flow_end[i] = now;
      flow_rate[i] = INF;
      finish_flow(i);
      return 0.0;
    }
    G.w_ref = G.progress(now);
    G.t_ref = now;
    G.tail = std::max(G.tail, G.w_ref) + carry;
    G.flows.push(flow_pool, G.tail, i);
    if (G.active++ == 0)
      for (int64_t k = G.path_lo; k < G.path_hi; ++k) ++link_count[path_links[k]];
    touch_links(G);
    touch_group(g);
    return carry;
  }

  void finish_flow(int64_t i) {  // flow of send i has carried everything at `now`
    double done_at = now + rto[i];
    if (rto[i] > 0) {
      push(done_at, EV_SEND_FLOW_DONE, i);
    } else {
      send_progress(i, now);
    }
    arrive_later(i, done_at + lat[c(i)]);
  }

  void arrive_later(int64_t i, double t) {
    if (t <= now) {
      arrive(i, t);
    } else {
      push(t, EV_ARRIVE, i);
    }
  }

  void flow_event(int64_t g, uint64_t version) {
    FlowGroup& G = groups[g];
    if (uint32_t(version) != uint32_t(G.version)) return;  // (events keep 32 bits of it)
    double w = G.progress(now);
    G.w_ref = w;
    G.t_ref = now;
    // A flow whose rest would take less than a few ulps of `now` ends now: its event could not
    // land later than `now` in floating point, and waiting for it would never end.
    double ulp = std::nextafter(now, INF) - now;
    double tol = std::max(1e-12 * std::max(1.0, std::fabs(w)), 4 * ulp * G.rate);
    while (!G.flows.empty() && G.flows.front(flow_pool).end <= w + tol) {
      int64_t i = G.flows.pop(flow_pool).op;
      if (--G.active == 0) {
        G.last_end = now;
        for (int64_t k = G.path_lo; k < G.path_hi; ++k) {
          int32_t l = path_links[k];
          if (--link_count[l] == 0) {  // idle from now, its bucket empty
            tokens[l] = 0;
            idle_since[l] = now;
          }
        }
      }
      flow_end[i] = now;
      flow_rate[i] = G.rate;
      finish_flow(i);
    }
    if (!G.flows.empty() && std::isnan(flow_start[G.flows.front(flow_pool).op])) {
      int64_t next = G.flows.front(flow_pool).op;
      flow_start[next] = now;  // the next in the stream moves from now
      G.run += vol[next];
    }
    touch_links(G);
    touch_group(int32_t(g));
  }

  double equal_share(const FlowGroup& G) const {  // paper 001 eq. 7
    double r = INF;
    for (int64_t k = G.path_lo; k < G.path_hi; ++k) {
      int32_t l = path_links[k];
      r = std::min(r, capacity[l] * duplex_scale(G, l) / double(link_count[l]));
    }
    return r;
  }

  // The share of link l of its path that stream G can use while data crosses l the other way
  // (l ^ 1, where G's acknowledgements queue): the duplex table's at G's run on the link into its
  // receiver's host, trunk_duplex[i] of its first flow i on a link between two switches; else 1.
  double duplex_scale(const FlowGroup& G, int32_t l) const {
    if (G.flows.empty() || link_count[l ^ 1] == 0) return 1.0;
    if (l == link_into(G)) {
      if (duplex_at.empty()) return 1.0;
      double share = duplex_of(G.run);
      return share + (1.0 - share) * recovered(link_count[l]);
    }
    return trunk_duplex != nullptr && trunk[l >> 1] ? trunk_duplex[G.flows.front(flow_pool).op] : 1.0;
  }
  // The part of the duplex table's shortfall that `streams` streams into one host recover
  // together: many_recover at many_streams or more, none for one, in between by log streams.
  double recovered(int64_t streams) const {
    if (streams <= 1 || many_recover <= 0) return 0.0;
    if (double(streams) >= many_streams) return many_recover;
    return many_recover * std::log(double(streams)) / std::log(many_streams);
  }
  double duplex_of(double units) const {
    double x = std::log2(std::max(units, 1.0));
    if (x <= duplex_at.front()) return duplex_share.front();
    if (x >= duplex_at.back()) return duplex_share.back();
    size_t k = 1;
    while (duplex_at[k] < x) ++k;
    double f = (x - duplex_at[k - 1]) / (duplex_at[k] - duplex_at[k - 1]);
    return duplex_share[k - 1] + f * (duplex_share[k] - duplex_share[k - 1]);
  }
  // The link down into G's receiver's host; its twin (^ 1) is that host's link up.
  int32_t link_into(const FlowGroup& G) const { return 2 * host_node[G.dst] + 1; }

  void set_rate(int32_t g, double rate) {
    FlowGroup& G = groups[g];
    G.w_ref = G.progress(now);
    G.t_ref = now;
    G.rate = rate;
    ++G.version;
    if (G.active > 0 && !G.flows.empty()) {
      double left = G.flows.front(flow_pool).end - G.w_ref;
      double t = rate > 0 ? now + std::max(left, 0.0) / rate : INF;
      if (t < INF) events.push(Event{t, counter++, EV_FLOW, g, G.version});
    }
  }

  void recompute_rates() {
    if (maxmin) {
      maxmin_rates();
    } else {
      for (int32_t l : dirty_links) {
        for (int32_t g : link_groups[l])
          if (groups[g].active > 0) touch_group(g);
        if (!duplex_at.empty() || trunk_duplex != nullptr)  // data starting or stopping the other way
          for (int32_t g : link_groups[l ^ 1])
            if (groups[g].active > 0) touch_group(g);
      }
      for (int32_t g : dirty_groups)
        if (groups[g].active > 0) set_rate(g, equal_share(groups[g]));
    }
    dirty_links.clear();
    dirty_groups.clear();
    ++stamp;
  }

  // Max-min fairness by progressive filling: repeatedly saturate the link whose remaining
  // capacity per unfrozen flow is smallest, fixing the rate of every flow that crosses it.
  void maxmin_rates() {
    std::vector<int32_t> active;
    for (int32_t g = 0; g < int32_t(groups.size()); ++g)
      if (groups[g].active > 0) active.push_back(g);
    std::vector<double> left(capacity);
    if (!duplex_at.empty() || trunk_duplex != nullptr) {  // a link carrying data both ways carries
      std::vector<double> share_of(capacity.size(), 1.0);   // the smallest duplex share of its streams
      for (int32_t g : active)
        for (int64_t k = groups[g].path_lo; k < groups[g].path_hi; ++k) {
          int32_t l = path_links[k];
          share_of[l] = std::min(share_of[l], duplex_scale(groups[g], l));
        }
      for (size_t l = 0; l < left.size(); ++l) left[l] *= share_of[l];
    }
    std::vector<int64_t> unfrozen(capacity.size(), 0);
    std::vector<uint8_t> frozen(groups.size(), 0);
    std::vector<int32_t> links;
    for (int32_t g : active)
      for (int64_t k = groups[g].path_lo; k < groups[g].path_hi; ++k) {
        int32_t l = path_links[k];
        if (unfrozen[l] == 0) links.push_back(l);
        ++unfrozen[l];
      }
    std::sort(links.begin(), links.end());
    size_t remaining = active.size();
    while (remaining > 0) {
      int32_t best = -1;
      double share = INF;
      for (int32_t l : links)
        if (unfrozen[l] > 0 && left[l] / double(unfrozen[l]) < share) {
          share = left[l] / double(unfrozen[l]);
          best = l;
        }
      if (best < 0) break;
      for (int32_t g : link_groups[best]) {
        if (frozen[g] || groups[g].active == 0) continue;
        frozen[g] = 1;
        --remaining;
        for (int64_t k = groups[g].path_lo; k < groups[g].path_hi; ++k) {
          int32_t l = path_links[k];
          left[l] = std::max(0.0, left[l] - share);
          --unfrozen[l];
        }
        set_rate(g, share);
      }
    }
    for (int32_t g : active)  // flows between ranks on one node cross no link
      if (!frozen[g]) set_rate(g, INF);
  }

  // -- main loop -----------------------------------------------------------------------------------
  void run() {
    hosts.assign(P, Host{});
    for (int64_t c = 0; c < cores; ++c) core_free.push(0.0);
    started.assign(n, 0);
    done.assign(n, 0);
    send_wait.assign(n, 0);
    for (int64_t i = 0; i < n; ++i) {
      start[i] = NAN;
      end[i] = NAN;
      if (flows_on) flow_start[i] = flow_end[i] = flow_rate[i] = NAN;
      if (pending[i] == 0) freed.push_back(i);
    }
    release();
    while (true) {
      bool dirty = !dirty_links.empty() || !dirty_groups.empty();
      if (dirty && (events.empty() || events.top().time > now * (1 + 1e-12) + 1e-300)) recompute_rates();
      if (events.empty()) break;
      Event ev = events.top();
      events.pop();
      now = std::max(now, ev.time);
      ++processed;
      switch (ev.type()) {
        case EV_HOST:
          if (ev.version == uint32_t(hosts[ev.a()].version)) {
            hosts[ev.a()].queued = false;
            fire_host(ev.a());
            schedule_host(ev.a());
          }
          break;
        case EV_RECV:
          post_recv(ev.a());
          break;
        case EV_FLOW:
          flow_event(ev.a(), ev.version);
          break;
        case EV_SEND_FLOW_DONE:
        case EV_ACK:
          send_progress(ev.a(), now);
          break;
        case EV_ARRIVE:
          arrive(ev.a(), now);
          break;
        case EV_FIFO_FLOW:
          join_flow(ev.a());  // its sender's queue already counts its whole volume
          break;
      }
      release();
    }
    for (int64_t r = 0; r < P; ++r) completion[r] = hosts[r].cpu;
    for (int64_t i = 0; i < n; ++i)
      if (done[i]) completion[rank[i]] = std::max(completion[rank[i]], end[i]);
  }
};

template <typename T>
const T* data_of(const In<T>& a, int64_t n, const char* name) {
  if (int64_t(a.shape(0)) != n)
    throw std::invalid_argument(std::string(name) + ": expected " + std::to_string(n) + " entries, got " +
                                std::to_string(a.shape(0)));
  return a.data();
}

nb::dict simulate(int64_t procs, In<int8_t> kind, In<int32_t> rank, In<int32_t> peer, In<int32_t> tag,
                  In<int64_t> rank_ptr, In<int64_t> dep_ptr, In<int64_t> dep_idx, In<bool> dep_start, bool in_order,
                  In<int32_t> cls, In<double> cost, In<double> cs, In<double> gs, In<double> lat, In<double> cr,
                  In<double> gr, In<uint8_t> rdv, In<double> ack, In<double> vol, In<double> rto, In<double> duplex_sizes,
                  In<double> duplex_shares, double warm_gap, double many_streams, double many_recover,
                  In<double> trunk_duplex,
                  In<int32_t> topo_parent,
                  In<double> topo_up,
                  In<double> topo_down, In<double> topo_burst, In<int32_t> host_node, bool maxmin,
                  double fifo_bytes, int64_t cores, In<double> core_cost,
                  Out<double> start, Out<double> end,
                  Out<double> flow_start, Out<double> flow_end, Out<double> flow_rate, Out<double> completion) {
  Engine e;
  e.P = procs;
  e.n = int64_t(kind.shape(0));
  int64_t n = e.n;
  e.kind = kind.data();
  e.rank = data_of(rank, n, "rank");
  e.peer = data_of(peer, n, "peer");
  e.tag = data_of(tag, n, "tag");
  e.rank_ptr = data_of(rank_ptr, procs + 1, "rank_ptr");
  const int64_t* dp = data_of(dep_ptr, n + 1, "dep_ptr");
  if (int64_t(dep_idx.shape(0)) != dp[n] || int64_t(dep_start.shape(0)) != dp[n])
    throw std::invalid_argument("dep_idx and dep_start must hold dep_ptr[-1] entries");
  int64_t priced = n;  // entries of the cost columns: one per op, or one per class
  if (cls.shape(0) > 0) {
    e.cls = data_of(cls, n, "cls");
    priced = int64_t(cost.shape(0));
    for (int64_t i = 0; i < n; ++i)
      if (e.cls[i] < 0 || e.cls[i] >= priced) throw std::invalid_argument("cls: a class outside the cost columns");
  }
  e.cost = data_of(cost, priced, "cost");
  e.cs = data_of(cs, priced, "cs");
  e.gs = data_of(gs, priced, "gs");
  e.lat = data_of(lat, priced, "lat");
  e.cr = data_of(cr, priced, "cr");
  e.gr = data_of(gr, priced, "gr");
  e.rdv = data_of(rdv, priced, "rdv");
  if (ack.shape(0) > 0) {
    e.ack = data_of(ack, n, "ack");
    for (int64_t i = 0; i < n; ++i)
      if (std::isnan(e.ack[i]) || std::isinf(e.ack[i])) throw std::invalid_argument("ack must be finite");
  }
  e.flows_on = topo_parent.shape(0) > 0;
  if (e.cls && (e.flows_on || ack.shape(0) > 0 || cores > 0))
    throw std::invalid_argument("cost classes apply without a topology only");
  e.maxmin = maxmin;
  e.fifo_bytes = fifo_bytes;
  if (cores < 0) throw std::invalid_argument("cores must be >= 0");
  e.cores = cores;
  if (cores > 0) {
    e.core_cost = data_of(core_cost, n, "core_cost");
    for (int64_t i = 0; i < n; ++i)
      if (!(e.core_cost[i] >= 0) || std::isinf(e.core_cost[i]))
        throw std::invalid_argument("core_cost must be finite and >= 0");
  }
  e.fifo_free.assign(procs, 0.0);
  e.vol = e.flows_on ? data_of(vol, n, "vol") : nullptr;
  e.rto = e.flows_on ? data_of(rto, n, "rto") : nullptr;
  if (duplex_shares.shape(0) != duplex_sizes.shape(0))
    throw std::invalid_argument("duplex_sizes and duplex_shares must have one entry each per row");
  if (!(warm_gap >= 0)) throw std::invalid_argument("warm_gap must be >= 0");
  e.warm_gap = warm_gap;
  if (many_recover != 0 && !(many_streams > 1 && many_recover > 0 && many_recover <= 1))
    throw std::invalid_argument("duplex streams must be more than 1 and their recovered part in (0, 1]");
  e.many_streams = many_streams;
  e.many_recover = many_recover;
  for (size_t k = 0; e.flows_on && k < duplex_sizes.shape(0); ++k) {
    if (!(duplex_sizes.data()[k] > 0) || (k > 0 && !(duplex_sizes.data()[k] > duplex_sizes.data()[k - 1])))
      throw std::invalid_argument("duplex_sizes must be positive and ascending");
    e.duplex_at.push_back(std::log2(duplex_sizes.data()[k]));
    e.duplex_share.push_back(duplex_shares.data()[k]);
  }
  e.trunk_duplex = e.flows_on && trunk_duplex.shape(0) > 0 ? data_of(trunk_duplex, n, "trunk_duplex") : nullptr;
  for (auto* out : {&start, &end, &flow_start, &flow_end, &flow_rate})
    if (int64_t(out->shape(0)) != n && (out == &start || out == &end || e.flows_on))
      throw std::invalid_argument("output arrays need one entry per op (the flows' only with a topology)");
  if (int64_t(completion.shape(0)) != procs) throw std::invalid_argument("completion needs one entry per rank");
  e.start = start.data();
  e.end = end.data();
  e.flow_start = flow_start.data();
  e.flow_end = flow_end.data();
  e.flow_rate = flow_rate.data();
  e.completion = completion.data();
  for (int64_t i = 0; i < n; ++i) {
    if (e.rank[i] < 0 || e.rank[i] >= procs) throw std::invalid_argument("rank out of range");
    int8_t k = kind.data()[i];
    if ((k == SEND || k == RECV) && (e.peer[i] < -int32_t(k == RECV) || e.peer[i] >= procs))
      throw std::invalid_argument("peer out of range");
    if ((k == SEND || k == RECV) && e.tag[i] < -int32_t(k == RECV)) throw std::invalid_argument("negative tag");
  }
  if (e.flows_on) {
    int64_t nodes = int64_t(topo_parent.shape(0));
    const int32_t* hn = data_of(host_node, procs, "host_node");
    for (int64_t r = 0; r < procs; ++r)
      if (hn[r] < 0 || hn[r] >= nodes) throw std::invalid_argument("host_node out of range");
    e.set_topology(topo_parent.data(), nodes, data_of(topo_up, nodes, "topo_up"),
                   data_of(topo_down, nodes, "topo_down"), data_of(topo_burst, nodes, "topo_burst"), hn);
  }
  e.build_deps(dp, dep_idx.data(), dep_start.data(), in_order);
  int64_t receives = 0;
  for (int64_t i = 0; i < n; ++i) receives += kind.data()[i] == RECV;
  Matcher matcher(receives);
  e.match = &matcher;
  e.set_matching(kind.data());
  {
    nb::gil_scoped_release unlocked;
    e.run();
  }
  int64_t unreceived = e.waiting_messages();
  int64_t unfinished = 0, first = -1;
  for (int64_t i = 0; i < n; ++i)
    if (!e.done[i]) {
      if (first < 0) first = i;
      ++unfinished;
    }
  double total = 0;
  for (int64_t r = 0; r < procs; ++r) total = std::max(total, e.completion[r]);
  nb::dict out;
  out["total"] = total;
  out["events"] = e.processed;
  out["unfinished"] = unfinished;
  out["unreceived"] = unreceived;
  out["first_unfinished"] = first;
  out["first_unfinished_started"] = first >= 0 ? bool(e.started[first]) : false;
  return out;
}

// Owned numpy array of n values, freed with it.
template <typename T>
nb::ndarray<nb::numpy, T, nb::ndim<1>> owned(std::vector<T>&& values) {
  auto* held = new std::vector<T>(std::move(values));
  nb::capsule free_it(held, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
  return nb::ndarray<nb::numpy, T, nb::ndim<1>>(held->data(), {held->size()}, free_it);
}

// The classes of ops that cost the same under a network that prices messages by their size
// alone: the same kind, length and delay.  Returns each op's class and the first op of each.
nb::tuple op_classes(In<int8_t> kind, In<int64_t> length, In<double> delay) {
  int64_t n = int64_t(kind.shape(0));
  const int64_t* len = data_of(length, n, "length");
  const double* del = data_of(delay, n, "delay");
  struct Key {
    int8_t kind;
    int64_t length;
    uint64_t delay;  // the bits: the same value, the same class
    bool operator==(const Key& o) const { return kind == o.kind && length == o.length && delay == o.delay; }
  };
  struct Hash {
    size_t operator()(const Key& k) const {
      uint64_t h = uint64_t(k.length) * 0x9E3779B97F4A7C15ULL ^ (k.delay + 0x632BE59BD9B4E019ULL + uint64_t(k.kind));
      return size_t(h ^ (h >> 29));
    }
  };
  std::unordered_map<Key, int32_t, Hash> seen;
  std::vector<int32_t> of(n);
  std::vector<int64_t> first;
  Key last{-1, -1, 0};
  int32_t last_class = -1;
  for (int64_t i = 0; i < n; ++i) {
    uint64_t bits;
    std::memcpy(&bits, &del[i], sizeof bits);
    Key k{kind.data()[i], len[i], bits};
    if (!(k == last)) {
      auto found = seen.find(k);
      if (found == seen.end()) {
        found = seen.emplace(k, int32_t(first.size())).first;
        first.push_back(i);
      }
      last = k;
      last_class = found->second;
    }
    of[i] = last_class;
  }
  return nb::make_tuple(owned(std::move(of)), owned(std::move(first)));
}

}  // namespace

NB_MODULE(_engine, m) {
  m.doc() = "colltune's event-driven simulator core (see colltune.sim).";
  m.def("simulate", &simulate, nb::arg("procs"), nb::arg("kind").noconvert(), nb::arg("rank").noconvert(),
        nb::arg("peer").noconvert(), nb::arg("tag").noconvert(), nb::arg("rank_ptr").noconvert(),
        nb::arg("dep_ptr").noconvert(), nb::arg("dep_idx").noconvert(), nb::arg("dep_start").noconvert(),
        nb::arg("in_order"), nb::arg("cls").noconvert(), nb::arg("cost").noconvert(), nb::arg("cs").noconvert(), nb::arg("gs").noconvert(),
        nb::arg("lat").noconvert(), nb::arg("cr").noconvert(), nb::arg("gr").noconvert(),
        nb::arg("rdv").noconvert(), nb::arg("ack").noconvert(), nb::arg("vol").noconvert(), nb::arg("rto").noconvert(),
        nb::arg("duplex_sizes").noconvert(), nb::arg("duplex_shares").noconvert(), nb::arg("warm_gap"),
        nb::arg("many_streams"), nb::arg("many_recover"), nb::arg("trunk_duplex").noconvert(),
        nb::arg("topo_parent").noconvert(), nb::arg("topo_up").noconvert(), nb::arg("topo_down").noconvert(),
        nb::arg("topo_burst").noconvert(), nb::arg("host_node").noconvert(), nb::arg("maxmin"), nb::arg("fifo_bytes"),
        nb::arg("cores"), nb::arg("core_cost").noconvert(), nb::arg("start").noconvert(),
        nb::arg("end").noconvert(), nb::arg("flow_start").noconvert(), nb::arg("flow_end").noconvert(), nb::arg("flow_rate").noconvert(),
        nb::arg("completion").noconvert(),
        "Time a schedule; fills the output arrays and returns total, events and unfinished-op counts.");
  m.def("op_classes", &op_classes, nb::arg("kind").noconvert(), nb::arg("length").noconvert(),
        nb::arg("delay").noconvert(), "Each op's class of ops of the same kind, length and delay; the first op of each.");
}
