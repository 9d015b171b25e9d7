// Record mode: COLLTUNE_RECORD=DIR makes the interposition library write, per rank, what the
// program called: the eight collectives (with the algorithm that ran each and its parameters),
// MPI_Send, MPI_Recv, MPI_Isend, MPI_Irecv, MPI_Wait, MPI_Waitall and MPI_Sendrecv, each with its
// start and end time, sizes in bytes, peers (ranks of the call's communicator, whose world ranks
// the record lists once) and tags.  A receive from MPI_ANY_SOURCE or with MPI_ANY_TAG records
// the source and tag it matched (from its status), and "any_source": true or "any_tag": true.
// The time between two calls is the program's own work.
//
// DIR/rank-<world rank>.jsonl is written at MPI_Finalize (to a temporary name, then renamed), one
// JSON object per line:
//
//   {"format": "colltune-record", "version": 1, "rank": R, "procs": P, "abi": "mpich"}
//   {"comm": C, "ranks": [world ranks of the communicator's ranks 0, 1, ...]}   (before its first use)
//   {"op": "send"|"recv"|"isend"|"irecv", "t0": s, "t1": s, "comm": C[, "any_source": true]
//    [, "any_tag": true], "peer": R, "tag": T, "bytes": N[, "req": K]}
//   {"op": "sendrecv", ..., "peer": R, "tag": T, "bytes": N, "from": R, "recv_tag": T, "recv_bytes": N}
//   {"op": "wait", "t0": s, "t1": s, "reqs": [K, ...]}
//   {"op": "bcast"|..., "t0": s, "t1": s, "comm": C, "root": comm rank, "size": block bytes,
//    "algorithm": name or "native", "params": {...}}
//
// Times are seconds of CLOCK_MONOTONIC.  Not recorded: the other MPI calls (a program that
// completes requests with MPI_Test or MPI_Waitany has them end at its next recorded wait), calls
// on intercommunicators, and calls to or from MPI_PROC_NULL (no message).

#include "record.hpp"

#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace colltune::pmpi {
namespace {

const char *const NAMES[NCOLL] = {"bcast", "scatter", "gather", "allgather", "alltoall", "reduce", "allreduce",
                                  "barrier"};

double now() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

struct Recorder {
  std::mutex lock;
  std::string dir;
  std::vector<std::string> lines;
  std::unordered_map<Raw, long> requests;  // an active request's handle -> its number
  long next_request = 0;
  // Receives not yet completed, by request number: their record's line (rewritten at completion
  // with the source, tag and size they got) and what they were posted with.
  struct Receive {
    std::size_t line;
    Raw type;
    int count;
  };
  std::unordered_map<long, Receive> receives;
  int next_comm = 0;
};

Recorder &recorder() {
  static Recorder r;
  return r;
}

// The record's id of ``comm`` (announcing its ranks on first use), or -1 where it is not recorded
// (an intercommunicator).  The id is kept in the communicator's state (record_slot), so it dies
// with the communicator.  Called with the recorder locked.
long comm_id(Recorder &r, Raw comm) {
  const Mpi &m = mpi();
  long *slot = record_slot(comm);
  if (slot == nullptr) return -1;
  if (*slot >= 0) return *slot;
  int inter = 0, size = 0;
  if (m.Comm_test_inter(comm, &inter) != 0 || inter || m.Comm_size(comm, &size) != 0) return -1;
  Raw group = 0, world = 0;
  std::vector<int> mine(static_cast<std::size_t>(size)), theirs(static_cast<std::size_t>(size));
  for (int i = 0; i < size; ++i) mine[static_cast<std::size_t>(i)] = i;
  if (m.Comm_group(comm, &group) != 0 || m.Comm_group(m.world, &world) != 0 ||
      m.Group_translate_ranks(group, size, mine.data(), world, theirs.data()) != 0)
    return -1;
  m.Group_free(&group);
  m.Group_free(&world);
  const long id = *slot = r.next_comm++;
  std::string line = "{\"comm\": " + std::to_string(id) + ", \"ranks\": [";
  for (int i = 0; i < size; ++i) line += (i ? ", " : "") + std::to_string(theirs[static_cast<std::size_t>(i)]);
  r.lines.push_back(line + "]}");
  return id;
}

std::string num(double x) {
  char text[64];
  std::snprintf(text, sizeof text, "%.9f", x);
  return text;
}

long long bytes(int count, Raw type) {
  int size = 0;
  if (mpi().Type_size(type, &size) != 0) return 0;
  return static_cast<long long>(count) * size;
}

int status_int(const void *status, int index) { return static_cast<const int *>(status)[index]; }

// The bytes a completed receive got, from its status.
long long received(const void *status, Raw type, int count) {
  int got = 0;
  if (mpi().Get_count(status, type, &got) != 0 || got < 0) return bytes(count, type);
  return bytes(got, type);
}

void add(Recorder &r, std::string line) { r.lines.push_back(std::move(line)); }

// What a receive was posted with, if it named MPI_ANY_SOURCE or MPI_ANY_TAG (before "peer", so
// that complete_receive keeps it).
std::string wildcards(int source, int tag) {
  return std::string(source == mpi().any_source ? ", \"any_source\": true" : "") +
         (tag == -1 ? ", \"any_tag\": true" : "");
}

std::string p2p(const char *op, double t0, double t1, long comm, int peer, int tag, long long n,
                const std::string &wild = "") {
  return std::string("{\"op\": \"") + op + "\", \"t0\": " + num(t0) + ", \"t1\": " + num(t1) +
         ", \"comm\": " + std::to_string(comm) + wild + ", \"peer\": " + std::to_string(peer) +
         ", \"tag\": " + std::to_string(tag) + ", \"bytes\": " + std::to_string(n);
}

// Where the status goes: the caller's, or ours when it passed MPI_STATUS_IGNORE.
struct StatusSpace {
  alignas(8) unsigned char space[64] = {};
  void *use(void *given) { return given == mpi().status_ignore ? space : given; }
};

// Rewrite the line of receive ``req`` with what its status says it got.
void complete_receive(Recorder &r, long req, const void *status) {
  auto it = r.receives.find(req);
  if (it == r.receives.end()) return;
  const Recorder::Receive &got = it->second;
  std::string &line = r.lines[got.line];
  const std::size_t at = line.find(", \"peer\": ");
  line = line.substr(0, at) + ", \"peer\": " + std::to_string(status_int(status, mpi().status_source)) +
         ", \"tag\": " + std::to_string(status_int(status, mpi().status_tag)) +
         ", \"bytes\": " + std::to_string(received(status, got.type, got.count)) + ", \"req\": " +
         std::to_string(req) + "}";
  r.receives.erase(it);
}

void write_file() {
  Recorder &r = recorder();
  const Mpi &m = mpi();
  int rank = 0, procs = 0;
  m.Comm_rank(m.world, &rank);
  m.Comm_size(m.world, &procs);
  mkdir(r.dir.c_str(), 0777);  // may exist
  const std::string path = r.dir + "/rank-" + std::to_string(rank) + ".jsonl";
  const std::string temp = path + ".tmp";
  FILE *f = std::fopen(temp.c_str(), "w");
  if (f == nullptr) {
    std::fprintf(stderr, "colltune (libcolltune_pmpi.so): cannot write %s: %s; nothing recorded\n", temp.c_str(),
                 std::strerror(errno));
    return;
  }
  std::fprintf(f, "{\"format\": \"colltune-record\", \"version\": 1, \"rank\": %d, \"procs\": %d, \"abi\": \"%s\"}\n",
               rank, procs, m.mpich ? "mpich" : "openmpi");
  for (const std::string &line : r.lines) std::fprintf(f, "%s\n", line.c_str());
  const bool ok = std::fflush(f) == 0 && fsync(fileno(f)) == 0;
  if (std::fclose(f) != 0 || !ok || std::rename(temp.c_str(), path.c_str()) != 0) {
    std::fprintf(stderr, "colltune (libcolltune_pmpi.so): cannot write %s: %s\n", path.c_str(), std::strerror(errno));
    std::remove(temp.c_str());
  }
}

bool active() { return recording() && !inside; }

}  // namespace

bool recording_on() {
  const char *dir = std::getenv("COLLTUNE_RECORD");
  if (dir == nullptr || *dir == 0) return false;
  if (!mpi().ok) {
    std::fprintf(stderr, "colltune (libcolltune_pmpi.so): COLLTUNE_RECORD is set, but the MPI library's ABI is "
                 "neither MPICH's nor Open MPI's; nothing is recorded\n");
    return false;
  }
  recorder().dir = dir;
  return true;
}

void CollectiveRecord::start(int coll, Raw comm, int root, int count, Raw datatype) {
  active_ = true;
  coll_ = coll;
  comm_ = mpi().handle(comm);
  root_ = root;
  bytes_ = coll == BARRIER ? 0 : bytes(count, datatype);
  t0_ = now();
}

void CollectiveRecord::finish() {
  const double t1 = now();
  Recorder &r = recorder();
  std::lock_guard<std::mutex> hold(r.lock);
  Inside guard;
  const long id = comm_id(r, comm_);
  if (id < 0) return;
  add(r, std::string("{\"op\": \"") + NAMES[coll_] + "\", \"t0\": " + num(t0_) + ", \"t1\": " + num(t1) +
             ", \"comm\": " + std::to_string(id) + ", \"root\": " + std::to_string(root_) +
             ", \"size\": " + std::to_string(bytes_) + ", \"algorithm\": \"" + last_algorithm + "\", \"params\": " +
             (last_algorithm == NATIVE ? "{}" : last_params) + "}");
}

}  // namespace colltune::pmpi

using namespace colltune::pmpi;

#define COLLTUNE_EXPORT extern "C" __attribute__((visibility("default")))

COLLTUNE_EXPORT int MPI_Send(const void *buf, int count, Raw type, int dest, int tag, Raw comm) {
  if (!active()) return mpi().Send(buf, count, type, dest, tag, comm);
  const double t0 = now();
  const int err = mpi().Send(buf, count, type, dest, tag, comm);
  const double t1 = now();
  Recorder &r = recorder();
  std::lock_guard<std::mutex> hold(r.lock);
  Inside guard;
  const long id = comm_id(r, mpi().handle(comm));
  if (id >= 0 && dest != mpi().proc_null) add(r, p2p("send", t0, t1, id, dest, tag, bytes(count, type)) + "}");
  return err;
}

COLLTUNE_EXPORT int MPI_Recv(void *buf, int count, Raw type, int source, int tag, Raw comm, void *status) {
  if (!active()) return mpi().Recv(buf, count, type, source, tag, comm, status);
  StatusSpace own;
  void *st = own.use(status);
  const double t0 = now();
  const int err = mpi().Recv(buf, count, type, source, tag, comm, st);
  const double t1 = now();
  Recorder &r = recorder();
  std::lock_guard<std::mutex> hold(r.lock);
  Inside guard;
  const long id = comm_id(r, mpi().handle(comm));
  if (id >= 0 && source != mpi().proc_null)
    add(r, p2p("recv", t0, t1, id, status_int(st, mpi().status_source), status_int(st, mpi().status_tag),
               received(st, type, count), wildcards(source, tag)) + "}");
  return err;
}

namespace {
int start_p2p(bool send, void *buf, int count, Raw type, int peer, int tag, Raw comm, void *request) {
  const Mpi &m = mpi();
  const double t0 = now();
  const int err = send ? m.Isend(buf, count, type, peer, tag, comm, request) : m.Irecv(buf, count, type, peer, tag, comm, request);
  const double t1 = now();
  Recorder &r = recorder();
  std::lock_guard<std::mutex> hold(r.lock);
  Inside guard;
  const long id = comm_id(r, m.handle(comm));
  if (id < 0 || peer == m.proc_null || err != 0) return err;
  const long req = r.next_request++;
  r.requests[m.request(request, 0)] = req;
  add(r, p2p(send ? "isend" : "irecv", t0, t1, id, peer, tag, bytes(count, type), send ? "" : wildcards(peer, tag)) +
             ", \"req\": " +
             std::to_string(req) + "}");
  if (!send) r.receives[req] = Recorder::Receive{r.lines.size() - 1, type, count};
  return err;
}

// Record the completion of ``n`` requests whose handles were ``handles`` (before the call).
void complete(double t0, double t1, int n, const Raw *handles, const unsigned char *statuses) {
  Recorder &r = recorder();
  std::lock_guard<std::mutex> hold(r.lock);
  Inside guard;
  std::string reqs;
  for (int i = 0; i < n; ++i) {
    auto it = r.requests.find(handles[i]);
    if (it == r.requests.end()) continue;
    const long req = it->second;
    r.requests.erase(it);
    complete_receive(r, req, statuses + static_cast<std::size_t>(i) * static_cast<std::size_t>(mpi().status_bytes));
    reqs += (reqs.empty() ? "" : ", ") + std::to_string(req);
  }
  add(r, "{\"op\": \"wait\", \"t0\": " + num(t0) + ", \"t1\": " + num(t1) + ", \"reqs\": [" + reqs + "]}");
}
}  // namespace

COLLTUNE_EXPORT int MPI_Isend(const void *buf, int count, Raw type, int dest, int tag, Raw comm, void *request) {
  if (!active()) return mpi().Isend(buf, count, type, dest, tag, comm, request);
  return start_p2p(true, const_cast<void *>(buf), count, type, dest, tag, comm, request);
}

COLLTUNE_EXPORT int MPI_Irecv(void *buf, int count, Raw type, int source, int tag, Raw comm, void *request) {
  if (!active()) return mpi().Irecv(buf, count, type, source, tag, comm, request);
  return start_p2p(false, buf, count, type, source, tag, comm, request);
}

COLLTUNE_EXPORT int MPI_Wait(void *request, void *status) {
  if (!active()) return mpi().Wait(request, status);
  StatusSpace own;
  void *st = own.use(status);
  const Raw handle = mpi().request(request, 0);
  const double t0 = now();
  const int err = mpi().Wait(request, st);
  complete(t0, now(), 1, &handle, static_cast<const unsigned char *>(st));
  return err;
}

COLLTUNE_EXPORT int MPI_Waitall(int count, void *requests, void *statuses) {
  if (!active() || count < 0) return mpi().Waitall(count, requests, statuses);
  std::vector<Raw> handles(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) handles[static_cast<std::size_t>(i)] = mpi().request(requests, i);
  std::vector<unsigned char> own;
  void *st = statuses;
  if (statuses == mpi().status_ignore) {
    own.assign(static_cast<std::size_t>(count) * static_cast<std::size_t>(mpi().status_bytes) + 8, 0);
    st = own.data();
  }
  const double t0 = now();
  const int err = mpi().Waitall(count, requests, st);
  complete(t0, now(), count, handles.data(), static_cast<const unsigned char *>(st));
  return err;
}

COLLTUNE_EXPORT int MPI_Sendrecv(const void *sendbuf, int sendcount, Raw sendtype, int dest, int sendtag, void *recvbuf,
                                 int recvcount, Raw recvtype, int source, int recvtag, Raw comm, void *status) {
  if (!active())
    return mpi().Sendrecv(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype, source, recvtag,
                          comm, status);
  StatusSpace own;
  void *st = own.use(status);
  const double t0 = now();
  const int err = mpi().Sendrecv(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype, source,
                                 recvtag, comm, st);
  const double t1 = now();
  Recorder &r = recorder();
  std::lock_guard<std::mutex> hold(r.lock);
  Inside guard;
  const long id = comm_id(r, mpi().handle(comm));
  if (id < 0) return err;
  const int from = source == mpi().proc_null ? -1 : status_int(st, mpi().status_source);
  add(r, p2p("sendrecv", t0, t1, id, dest == mpi().proc_null ? -1 : dest, sendtag, bytes(sendcount, sendtype),
             from < 0 ? "" : wildcards(source, recvtag)) +
             ", \"from\": " + std::to_string(from) + ", \"recv_tag\": " +
             std::to_string(from < 0 ? 0 : status_int(st, mpi().status_tag)) + ", \"recv_bytes\": " +
             std::to_string(from < 0 ? 0 : received(st, recvtype, recvcount)) + "}");
  return err;
}

COLLTUNE_EXPORT int MPI_Finalize() {
  if (recording()) {
    Recorder &r = recorder();
    std::lock_guard<std::mutex> hold(r.lock);
    Inside guard;
    write_file();
  }
  return mpi().Finalize();
}
