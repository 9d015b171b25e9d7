// One rank's part of a schedule, compiled into steps, and the runners that execute a collective
// call on one rank: a schedule bound to buffers with persistent requests, or the MPI library's
// own collective.  Plain C++ over colltune::exec::Library; no Python.
//
// Semantics (colltune.schedule.ir, the ones the verifier proves and the Python executor has):
// a rank starts its operations in list order; before an operation starts, everything it
// *requires* has completed; sends and receives are persistent requests started in that order;
// copies and reductions happen when they start; a delay busy-waits; at the end the rank waits
// for every request still open.
//
// Since the order is fixed, which requests an operation must wait for is known when the program
// is compiled: a request is waited for once, by the first operation that requires it, and the
// rest are waited for at the end.  A program is therefore a list of steps: start a run of
// consecutive requests (MPI_Startall), wait for a set of requests (MPI_Waitall), copy, reduce,
// delay.  Grouping consecutive starts, and the waits of one operation, into one call each changes
// nothing that MPI can observe: the requests are started in the same order, and an operation
// that waits for several requests starts only once all of them have completed.

#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "mpi_abi.hpp"
#include "reduce_ops.hpp"

namespace colltune::exec {

// Whether this machine's memmove is slowed by "4K aliasing": a forward copy whose destination
// lies a few bytes past its source within a 4 KiB page (0 < (dst - src) mod 4096 < 32) can make
// every load wait for an unrelated store with the same page offset.  On the machine the executor
// was first measured on (AMD EPYC, glibc 2.36) glibc's memmove of 4 KiB to 256 KiB then ran 10 to
// 20 times slower (64 KiB: 35 us instead of 1.6 us), and numpy's small arrays, 16-byte aligned
// and allocated one after the other, often sit just so.  On another host of the same VM type the
// same copy took 1.4 us against 1.2 us, and copying backwards there made a P = 2 ring allgather
// of 128 KiB 1.6x slower than MPICH's.  So it is measured, once per process (at import): a
// 64 KiB memmove 16 bytes past against one 64 bytes past, best of 5 each (well under 1 ms), and
// aliasing counts if the first is 3 times slower.  (benchmarks/diagnostics/copy_aliasing.py shows both.)
// COLLTUNE_ALIASING=yes or no skips the measurement (the tests run both ways).
inline bool memmove_aliases() {
  static const bool slow = [] {
    if (const char *given = std::getenv("COLLTUNE_ALIASING")) {
      const std::string v(given);
      if (v == "yes" || v == "no") return v == "yes";
    }
    constexpr std::size_t N = std::size_t{64} << 10, PAGE = 4096;
    std::vector<unsigned char> arena(2 * N + 3 * PAGE, 1);
    unsigned char *src = arena.data() + (PAGE - reinterpret_cast<std::uintptr_t>(arena.data()) % PAGE) % PAGE;
    auto best = [&](std::size_t delta) {
      unsigned char *dst = src + N + PAGE + delta;
      double fastest = 1e9;
      for (int i = 0; i < 5; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        std::memmove(dst, src, N);
        asm volatile("" : : "r"(dst) : "memory");  // the copy must happen
        fastest = std::min(fastest, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      }
      return fastest;
    };
    return best(16) > 3 * best(64);
  }();
  return slow;
}

// Copy ``n`` bytes; the regions may overlap.  Where memmove aliases (above), a copy from 4 KiB to
// 512 KiB whose destination is within 32 bytes past its source modulo 4096 goes backwards in
// 64-byte steps, which does not alias (3 us at 64 KiB on that machine); larger copies are not
// slowed and stay with memmove.
inline void copy_bytes(unsigned char *dst, const unsigned char *src, std::size_t n) {
  constexpr std::size_t PAGE = 4096, CLOSE = 32, STEP = 64, LARGE = std::size_t{512} << 10;
  const std::uintptr_t d = reinterpret_cast<std::uintptr_t>(dst), s = reinterpret_cast<std::uintptr_t>(src);
  const std::uintptr_t offset = (d - s) % PAGE;
  const bool disjoint = d >= s + n || s >= d + n;
  if (n < PAGE || n >= LARGE || offset == 0 || offset >= CLOSE || !disjoint || !memmove_aliases()) {
    std::memmove(dst, src, n);
    return;
  }
  std::size_t i = n;
  while (i >= STEP) {
    i -= STEP;
    unsigned char block[STEP];
    std::memcpy(block, src + i, STEP);
    std::memcpy(dst + i, block, STEP);
  }
  std::memcpy(dst, src, i);
}

// Kinds of colltune.schedule.Kind and buffers of colltune.schedule.Buf.
enum Kind : std::int8_t { SEND = 0, RECV = 1, COPY = 2, REDUCE = 3, DELAY = 4 };
enum Buffer : std::int8_t { SEND_BUF = 0, RECV_BUF = 1, SCRATCH_BUF = 2 };

// A byte range of one of the rank's three buffers.
struct Region {
  std::int8_t buf;
  std::int64_t offset;
  std::int64_t length;
};

struct Message {
  bool send;
  int peer;
  int tag;
  Region region;
};

enum StepKind : std::uint8_t { START, WAIT, STEP_COPY, STEP_REDUCE, STEP_DELAY };

struct Step {
  StepKind kind;
  std::uint32_t first = 0, count = 0;  // START: requests [first, first + count); WAIT: wait list slots
  Region dst{}, src{};                 // COPY, REDUCE
  ReduceFn fn = nullptr;               // REDUCE
  double seconds = 0;                  // DELAY
};

// The columns of one rank's operations (colltune.schedule.Schedule, sliced to the rank) and the
// completion dependencies of each, as local indices in CSR form.
struct RankOps {
  std::size_t n = 0;
  const std::int8_t *kind, *buf, *src_buf, *redop, *dtype;
  const std::int32_t *peer, *tag;
  const std::int64_t *offset, *length, *src_offset;
  const double *delay;
  const std::int64_t *req_ptr, *req_idx;  // op i requires req_idx[req_ptr[i]:req_ptr[i+1]]
};

// One rank's part of a schedule, compiled; independent of buffers and communicator.
class Program {
 public:
  Program(const RankOps &ops, std::int64_t send_bytes, std::int64_t recv_bytes, std::int64_t scratch_bytes)
      : sizes_{send_bytes, recv_bytes, scratch_bytes} {
    std::vector<std::int64_t> request_of(ops.n, -1);
    std::vector<bool> done(ops.n, false);
    std::uint32_t pending_first = 0, pending_count = 0;
    auto flush = [&] {
      if (pending_count) steps_.push_back(Step{START, pending_first, pending_count});
      pending_count = 0;
    };
    for (std::size_t i = 0; i < ops.n; ++i) {
      const Region region{ops.buf[i], ops.offset[i], ops.length[i]};
      check_region(region, i, "region");
      std::vector<std::uint32_t> wait;
      for (std::int64_t k = ops.req_ptr[i]; k < ops.req_ptr[i + 1]; ++k) {
        const std::int64_t d = ops.req_idx[k];
        if (d < 0 || static_cast<std::size_t>(d) >= i) throw MpiFailure(where(i) + ": requires a later operation");
        if (!done[d] && request_of[d] >= 0) wait.push_back(static_cast<std::uint32_t>(request_of[d]));
        done[d] = true;
      }
      if (!wait.empty()) {
        flush();
        steps_.push_back(Step{WAIT, static_cast<std::uint32_t>(wait_slots_.size()),
                              static_cast<std::uint32_t>(wait.size())});
        wait_slots_.insert(wait_slots_.end(), wait.begin(), wait.end());
      }
      const int kind = ops.kind[i];
      if (kind == SEND || kind == RECV) {
        const auto r = static_cast<std::uint32_t>(messages_.size());
        request_of[i] = r;
        messages_.push_back(Message{kind == SEND, ops.peer[i], ops.tag[i], region});
        if (pending_count == 0) pending_first = r;
        ++pending_count;
        continue;
      }
      flush();
      done[i] = true;
      Step step{};
      if (kind == COPY || kind == REDUCE) {
        step.kind = kind == COPY ? STEP_COPY : STEP_REDUCE;
        step.dst = region;
        step.src = Region{ops.src_buf[i], ops.src_offset[i], ops.length[i]};
        check_region(step.src, i, "source region");
        if (kind == REDUCE) {
          step.fn = reduce_function(ops.redop[i], ops.dtype[i]);
          if (step.fn == nullptr) throw MpiFailure(where(i) + ": no reduction for this operation and dtype");
          if (step.src.buf == step.dst.buf && step.src.offset != step.dst.offset &&
              step.src.offset < step.dst.offset + step.dst.length && step.dst.offset < step.src.offset + step.src.length)
            throw MpiFailure(where(i) + ": reduction source and destination overlap");
        }
      } else if (kind == DELAY) {
        step.kind = STEP_DELAY;
        step.seconds = ops.delay[i];
      } else {
        throw MpiFailure(where(i) + ": unknown operation kind " + std::to_string(kind));
      }
      steps_.push_back(step);
    }
    flush();
    std::vector<std::uint32_t> rest;
    for (std::size_t i = 0; i < ops.n; ++i)
      if (!done[i] && request_of[i] >= 0) rest.push_back(static_cast<std::uint32_t>(request_of[i]));
    if (!rest.empty()) {
      steps_.push_back(Step{WAIT, static_cast<std::uint32_t>(wait_slots_.size()), static_cast<std::uint32_t>(rest.size())});
      wait_slots_.insert(wait_slots_.end(), rest.begin(), rest.end());
    }
  }

  const std::vector<Step> &steps() const { return steps_; }
  const std::vector<Message> &messages() const { return messages_; }
  const std::vector<std::uint32_t> &wait_slots() const { return wait_slots_; }
  std::int64_t bytes(int buf) const { return sizes_[buf]; }

 private:
  static std::string where(std::size_t i) { return "operation " + std::to_string(i); }
  void check_region(const Region &r, std::size_t i, const char *what) const {
    if (r.buf < 0 || r.buf > SCRATCH_BUF || r.offset < 0 || r.length < 0 || r.offset + r.length > sizes_[r.buf])
      throw MpiFailure(where(i) + ": " + what + " outside its buffer");
  }

  std::int64_t sizes_[3];
  std::vector<Step> steps_;
  std::vector<Message> messages_;
  std::vector<std::uint32_t> wait_slots_;
};

// Something that performs one collective call on one rank.
class Runner {
 public:
  virtual ~Runner() = default;
  virtual void run() = 0;
  // Give back the MPI resources (idempotent; does nothing once MPI is finalized).
  virtual void release() noexcept = 0;
  // Bytes of memory this runner holds besides its program (requests are not counted).
  virtual std::int64_t scratch_bytes() const { return 0; }
};

// A program bound to a rank's buffers and a communicator: persistent requests, made once.
template <class A>
class ScheduleRunner final : public Runner {
 public:
  using Request = typename A::Request;

  // ``base``: the SEND, RECV and SCRATCH buffers (each at least the program's size for it).
  ScheduleRunner(const Library<A> &mpi, std::shared_ptr<const Program> program, Handle comm, Handle byte,
                 unsigned char *const base[3])
      : mpi_(mpi), program_(std::move(program)) {
    const auto c = to_mpi<typename A::Comm>(comm);
    const auto b = to_mpi<typename A::Datatype>(byte);
    const auto &messages = program_->messages();
    requests_.reserve(messages.size());
    try {
      for (const Message &m : messages) {
        unsigned char *p = base[m.region.buf] + m.region.offset;
        const ByteCount<A> n = byte_count(mpi_, b, m.region.length);
        if (n.owned) types_.push_back(n.type);
        Request r{};
        if (m.send) {
          mpi_.check(mpi_.Send_init(p, n.count, n.type, m.peer, m.tag, c, &r), "MPI_Send_init");
        } else {
          mpi_.check(mpi_.Recv_init(p, n.count, n.type, m.peer, m.tag, c, &r), "MPI_Recv_init");
        }
        requests_.push_back(r);
      }
    } catch (...) {
      release();
      throw;
    }
    for (std::uint32_t slot : program_->wait_slots()) waits_.push_back(requests_[slot]);
    steps_ = program_->steps();
    for (Step &s : steps_) {
      if (s.kind == STEP_COPY || s.kind == STEP_REDUCE) {
        resolved_.push_back({base[s.dst.buf] + s.dst.offset, base[s.src.buf] + s.src.offset});
        s.first = static_cast<std::uint32_t>(resolved_.size() - 1);
      }
    }
  }

  ~ScheduleRunner() override { release(); }

  void run() override {
    for (const Step &s : steps_) {
      switch (s.kind) {
        case START:
          mpi_.check(mpi_.Startall(static_cast<int>(s.count), requests_.data() + s.first), "MPI_Startall");
          break;
        case WAIT:
          mpi_.check(mpi_.Waitall(static_cast<int>(s.count), waits_.data() + s.first, A::statuses_ignore()),
                     "MPI_Waitall");
          break;
        case STEP_COPY: {
          const auto &p = resolved_[s.first];
          copy_bytes(p.dst, p.src, static_cast<std::size_t>(s.dst.length));
          break;
        }
        case STEP_REDUCE: {
          const auto &p = resolved_[s.first];
          s.fn(p.dst, p.src, static_cast<std::size_t>(s.dst.length));
          break;
        }
        case STEP_DELAY: {
          const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(s.seconds);
          while (std::chrono::steady_clock::now() < end) {
          }
          break;
        }
      }
    }
  }

  void release() noexcept override {
    if (requests_.empty() && types_.empty()) return;
    if (!mpi_.finalized()) {
      for (Request &r : requests_) mpi_.Request_free(&r);
      for (auto &t : types_) mpi_.Type_free(&t);
    }
    requests_.clear();
    types_.clear();
    waits_.clear();
    steps_.clear();
  }

 private:
  struct Pointers {
    unsigned char *dst;
    const unsigned char *src;
  };
  const Library<A> &mpi_;
  std::shared_ptr<const Program> program_;
  std::vector<Request> requests_, waits_;
  std::vector<typename A::Datatype> types_;
  std::vector<Step> steps_;
  std::vector<Pointers> resolved_;
};

// The collectives, in the order of colltune.collectives.COLLECTIVES.
enum Collective : int { BCAST, SCATTER, GATHER, ALLGATHER, ALLTOALL, REDUCE_COLL, ALLREDUCE, BARRIER, NUM_COLLECTIVES };

// What the library's own collective needs besides buffers: block size in bytes, root, and for
// the reductions the element count, datatype and operation handles.
struct NativeCall {
  int collective;
  std::int64_t block;  // bytes per block (bcast: the message)
  int root;
  std::int64_t count;  // reductions: elements
  Handle datatype, op;
};

// The MPI library's own collective on fixed buffers.
template <class A>
class NativeRunner final : public Runner {
 public:
  NativeRunner(const Library<A> &mpi, const NativeCall &call, Handle comm, Handle byte, const unsigned char *send,
               unsigned char *recv)
      : mpi_(mpi), call_(call), comm_(to_mpi<typename A::Comm>(comm)), send_(send), recv_(recv) {
    if (call.collective < 0 || call.collective >= NUM_COLLECTIVES) throw MpiFailure("unknown collective");
    if (call.collective == REDUCE_COLL || call.collective == ALLREDUCE) {
      if (call.count > INT_MAX) throw MpiFailure("more than INT_MAX elements to reduce");
      type_ = to_mpi<typename A::Datatype>(call.datatype);
      op_ = to_mpi<typename A::Op>(call.op);
      count_ = static_cast<int>(call.count);
    } else if (call.collective != BARRIER) {
      const ByteCount<A> n = byte_count(mpi_, to_mpi<typename A::Datatype>(byte), call.block);
      type_ = n.type;
      count_ = n.count;
      owned_ = n.owned;
    }
  }

  ~NativeRunner() override { release(); }

  void run() override {
    const int root = call_.root;
    switch (call_.collective) {
      case BCAST:
        mpi_.check(mpi_.Bcast(recv_, count_, type_, root, comm_), "MPI_Bcast");
        break;
      case SCATTER:
        mpi_.check(mpi_.Scatter(send_, count_, type_, recv_, count_, type_, root, comm_), "MPI_Scatter");
        break;
      case GATHER:
        mpi_.check(mpi_.Gather(send_, count_, type_, recv_, count_, type_, root, comm_), "MPI_Gather");
        break;
      case ALLGATHER:
        mpi_.check(mpi_.Allgather(send_, count_, type_, recv_, count_, type_, comm_), "MPI_Allgather");
        break;
      case ALLTOALL:
        mpi_.check(mpi_.Alltoall(send_, count_, type_, recv_, count_, type_, comm_), "MPI_Alltoall");
        break;
      case REDUCE_COLL:
        mpi_.check(mpi_.Reduce(send_, recv_, count_, type_, op_, root, comm_), "MPI_Reduce");
        break;
      case ALLREDUCE:
        mpi_.check(mpi_.Allreduce(send_, recv_, count_, type_, op_, comm_), "MPI_Allreduce");
        break;
      default:
        mpi_.check(mpi_.Barrier(comm_), "MPI_Barrier");
    }
  }

  void release() noexcept override {
    if (owned_ && !mpi_.finalized()) mpi_.Type_free(&type_);
    owned_ = false;
  }

 private:
  const Library<A> &mpi_;
  NativeCall call_;
  typename A::Comm comm_;
  const unsigned char *send_;
  unsigned char *recv_;
  typename A::Datatype type_{};
  typename A::Op op_{};
  int count_ = 0;
  bool owned_ = false;
};

}  // namespace colltune::exec
