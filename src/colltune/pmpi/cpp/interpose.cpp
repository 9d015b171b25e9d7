// libcolltune_pmpi.so: run what a decision table says inside an unmodified MPI program.
//
//   LD_PRELOAD=$(colltune lib) COLLTUNE_TABLE=t.json mpiexec -n 8 ./app
//
// This library defines MPI_Bcast, MPI_Scatter, MPI_Gather, MPI_Allgather, MPI_Alltoall,
// MPI_Reduce, MPI_Allreduce and MPI_Barrier.  Loaded before the MPI library, its definitions are
// the ones the program's calls reach (the MPI profiling interface); the library's own collectives
// stay reachable as PMPI_*.  Each call is sent to one of two places:
//
// * the library's own collective (PMPI_*), unchanged, when COLLTUNE_TABLE is not set, for
//   intercommunicators, derived or non-contiguous datatypes, counts that overflow, operations or
//   datatypes colltune's executor does not reduce, and wherever the table says ``native`` (or
//   covers not the communicator's size);
// * a runner of colltune's compiled executor (colltune.runtime._exec), bound to the call's
//   buffers, otherwise.
//
// The decisions and the schedules are the Python package's (colltune.pmpi.signatures): the first
// call that could run one of colltune's algorithms starts an embedded Python interpreter in the
// process (the environment colltune is installed in, found from this library's own path), once.
// Per communicator (an MPI attribute, freed with it), this library keeps
//
// * signatures: (collective, root, block bytes, datatype and operation of a reduction) with what
//   the ranks agreed on them (Python's ``resolve``, collective, at the first call of a signature on
//   every rank); at most MAX_SIGNATURES, the least recently called out, by a clock of the
//   communicator's calls that ticks alike on every rank, so every rank misses at the same calls;
// * bindings: a signature's runner on one rank's buffers (Python's ``bind``, local); at most
//   MAX_BINDINGS, least recently used out.
//
// A repeated call is then a few comparisons and the runner's C entry (no Python).  MPI_IN_PLACE
// is run from a copy: the block the call takes in place is copied into a buffer of the binding
// first (gather, reduce and scatter at the root; allgather, alltoall and allreduce).
//
// Handles: MPICH's ABI (libmpi.so.12) has int handles, Open MPI's (libmpi.so.40) pointers.  Both
// are passed in integer registers or 8-byte stack slots on the 64-bit Linux ABIs (x86-64, AArch64),
// so this library takes and passes every handle as one machine word (``Raw``) and reads MPICH's
// as the low 32 bits, unsigned as mpi4py shows them.

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "mpi_raw.hpp"
#include "record.hpp"

#ifndef COLLTUNE_PYTHON
#define COLLTUNE_PYTHON ""
#endif

namespace {

using namespace colltune::pmpi;

using RunEntry = int (*)(void *, char *, std::size_t);

constexpr std::size_t MAX_SIGNATURES = 64;  // per communicator, as colltune.runtime.state
constexpr std::size_t MAX_BINDINGS = 64;    // per communicator

// A lasting copy of an algorithm's name (there are a few dozen).
const char *intern(const char *name) {
  static std::mutex lock;
  static std::set<std::string> names;
  std::lock_guard<std::mutex> hold(lock);
  return names.insert(name).first->c_str();
}

[[noreturn]] COLLTUNE_COLD void fail(Raw comm, const std::string &what) {
  std::fprintf(stderr, "colltune (libcolltune_pmpi.so): %s\n", what.c_str());
  std::fflush(stderr);
  mpi().Abort(comm, 1);
  std::abort();
}

// ---------------------------------------------------------------------------------------------
// Datatypes: bytes per element of a predefined, contiguous datatype, else -1.  Predefined handles
// never change meaning, so this thread remembers them; derived types are asked every time.

struct TypeMemo {
  Raw handle[16] = {};
  int size[16] = {};
  int n = 0, next = 0;
};
COLLTUNE_TLS TypeMemo types;

COLLTUNE_COLD int ask_type_bytes(Raw t) {
  const Mpi &m = mpi();
  int ni = 0, na = 0, nd = 0, combiner = -1, size = 0;
  std::intptr_t lb = 0, extent = 0;
  if (m.Type_get_envelope(t, &ni, &na, &nd, &combiner) != 0 || combiner != m.combiner_named) return -1;
  if (m.Type_size(t, &size) != 0 || m.Type_get_extent(t, &lb, &extent) != 0 || lb != 0 || extent != size) return -1;
  types.handle[types.next] = t;
  types.size[types.next] = size;
  types.next = (types.next + 1) % 16;
  types.n = std::min(types.n + 1, 16);
  return size;
}

inline int type_bytes(Raw t) {
  for (int i = 0; i < types.n; ++i)
    if (types.handle[i] == t) return types.size[i];
  return ask_type_bytes(t);
}

// count elements of t as bytes, or -1 where colltune cannot run them.
std::int64_t bytes_of(int count, Raw t) {
  if (count < 0) return -1;
  const int s = type_bytes(t);
  return s < 0 ? -1 : static_cast<std::int64_t>(count) * s;
}

// ---------------------------------------------------------------------------------------------
// The embedded interpreter and the Python side (colltune.pmpi.signatures).

struct Python {
  std::once_flag once;
  bool ok = false;
  PyObject *resolve = nullptr, *bind = nullptr, *check = nullptr;
};
Python py;

std::string library_dir() {
  Dl_info info;
  if (dladdr(reinterpret_cast<void *>(&library_dir), &info) == 0 || info.dli_fname == nullptr) return "";
  std::string path = info.dli_fname;
  return path.substr(0, path.rfind('/'));
}

void report_python_error(const char *what) {
  std::fprintf(stderr, "colltune (libcolltune_pmpi.so): %s; every collective goes to the MPI library:\n", what);
  PyErr_Print();
  std::fflush(stderr);
}

// The Python to start: COLLTUNE_PYTHON, else the one that built this library, else the
// environment's own python3 (this library is in PREFIX/lib/pythonX.Y/site-packages/colltune/pmpi),
// for a library built elsewhere.
std::string python_executable() {
  const char *given = std::getenv("COLLTUNE_PYTHON");
  if (given != nullptr && *given != 0) return given;
  if (access(COLLTUNE_PYTHON, X_OK) == 0) return COLLTUNE_PYTHON;
  std::string prefix = library_dir();
  for (int up = 0; up < 5; ++up) prefix = prefix.substr(0, prefix.rfind('/'));
  return prefix + "/bin/python3";
}

void start_python() {
  const bool own = !Py_IsInitialized();
  if (own) {
    PyConfig config;
    PyConfig_InitPythonConfig(&config);
    config.install_signal_handlers = 0;
    config.parse_argv = 0;
    const std::string exe_path = python_executable();
    const char *exe = exe_path.c_str();
    PyStatus st = PyConfig_SetBytesString(&config, &config.program_name, exe);
    if (!PyStatus_Exception(st)) st = Py_InitializeFromConfig(&config);
    PyConfig_Clear(&config);
    if (PyStatus_Exception(st)) {
      std::fprintf(stderr, "colltune (libcolltune_pmpi.so): cannot start Python %s (%s); every collective goes "
                   "to the MPI library\n", exe, st.err_msg ? st.err_msg : "");
      return;
    }
  }
  PyGILState_STATE gil = PyGILState_Ensure();
  // This library lives in site-packages/colltune/pmpi: add that site-packages, with its .pth
  // files (an editable install's), so that colltune can be imported.  It goes after the
  // interpreter's own paths: the environment COLLTUNE_PYTHON names keeps its own mpi4py and
  // numpy (those built for the program's MPI library).
  const std::string dir = library_dir();
  const std::string site = dir.substr(0, dir.rfind('/', dir.rfind('/') - 1));
  PyObject *mod = nullptr;
  PyObject *sitemod = PyImport_ImportModule("site");
  PyObject *added = sitemod ? PyObject_CallMethod(sitemod, "addsitedir", "s", site.c_str()) : nullptr;
  if (added != nullptr) mod = PyImport_ImportModule("colltune.pmpi.signatures");
  PyObject *settings = mod != nullptr ? PyImport_ImportModule("colltune.pmpi.settings") : nullptr;
  if (settings != nullptr) {
    py.resolve = PyObject_GetAttrString(mod, "resolve");
    py.bind = PyObject_GetAttrString(mod, "bind");
    py.check = PyObject_GetAttrString(settings, "check_job");
    py.ok = py.resolve != nullptr && py.bind != nullptr && py.check != nullptr;
  }
  if (!py.ok) report_python_error("cannot import colltune.pmpi.signatures");
  Py_XDECREF(settings);
  Py_XDECREF(added);
  Py_XDECREF(sitemod);
  Py_XDECREF(mod);
  PyGILState_Release(gil);
  if (own) PyEval_SaveThread();  // the interpreter's start left this thread holding the GIL
}

bool python_ready() {
  std::call_once(py.once, start_python);
  return py.ok;
}

// ---------------------------------------------------------------------------------------------
// Per-communicator state.

struct Binding {
  Raw send = 0, recv = 0;  // as the call passed them (MPI_IN_PLACE included)
  PyObject *keep = nullptr;
  RunEntry run = nullptr;
  void *runner = nullptr;
  std::vector<unsigned char> temp;  // the copy an in-place call runs from
  const unsigned char *copy_from = nullptr;  // copied into temp before each run (in place)
  std::uint64_t last = 0;
};

struct Signature {
  int coll = 0, root = 0;
  std::int64_t size = 0;
  Raw datatype = 0, op = 0;
  PyObject *sig = nullptr;  // null: the library's collective
  const char *algorithm = "native";  // interned (see intern)
  const char *params = "{}";         // the algorithm's parameters, JSON, interned
  std::uint64_t last = 0;
  std::vector<Binding> bindings;

  bool is(int c, int r, std::int64_t s, Raw d, Raw o) const {
    return coll == c && root == r && size == s && datatype == d && op == o;
  }
};

struct CommCache {
  Raw comm = 0;
  int procs = 0, rank = 0;
  bool inter = false;
  std::uint64_t clock = 0;
  std::size_t last = 0;  // index of the last signature found
  std::vector<Signature> sigs;
  long record_id = -1;  // record mode's id of the communicator (record_slot)

  std::size_t binding_count() const {
    std::size_t n = 0;
    for (const Signature &s : sigs) n += s.bindings.size();
    return n;
  }
};

void drop_python(PyObject *o) {
  if (o == nullptr || !Py_IsInitialized()) return;
  PyGILState_STATE gil = PyGILState_Ensure();
  Py_DECREF(o);
  PyGILState_Release(gil);
}

void drop_signature(Signature &s) {
  for (Binding &b : s.bindings) drop_python(b.keep);
  s.bindings.clear();
  drop_python(s.sig);
  s.sig = nullptr;
}

int copy_attr(Raw, int, void *, void *, void *, int *flag) {
  *flag = 0;  // a duplicate starts without colltune's state
  return 0;
}

// Bumped whenever a communicator's state is deleted, which forgets every thread's CommMemo.
std::atomic<std::uint64_t> generation{1};

int delete_attr(Raw, int, void *value, void *) {
  auto *cache = static_cast<CommCache *>(value);
  generation.fetch_add(1, std::memory_order_acq_rel);
  Inside guard;
  for (Signature &s : cache->sigs) drop_signature(s);
  delete cache;
  return 0;
}

// The attribute key of colltune's state (MPICH's keys are handles, negative ints: ``made`` says
// whether there is one).
struct Keyval {
  bool made = false;
  int key = 0;
};

const Keyval &keyval() {
  static const Keyval k = [] {
    Keyval v;
    v.made = mpi().Comm_create_keyval(reinterpret_cast<void *>(&copy_attr), reinterpret_cast<void *>(&delete_attr),
                                      &v.key, nullptr) == 0;
    return v;
  }();
  return k;
}

// This communicator's state, made on first use (null where MPI refuses).
COLLTUNE_COLD CommCache *find_cache(Raw comm) {
  const Mpi &m = mpi();
  const Keyval &kv = keyval();
  if (!kv.made) return nullptr;
  const int key = kv.key;
  void *value = nullptr;
  int flag = 0;
  if (m.Comm_get_attr(comm, key, &value, &flag) != 0) return nullptr;
  if (flag) return static_cast<CommCache *>(value);
  auto *c = new CommCache;
  c->comm = comm;
  int inter = 0;
  if (m.Comm_test_inter(comm, &inter) != 0 || m.Comm_size(comm, &c->procs) != 0 || m.Comm_rank(comm, &c->rank) != 0) {
    delete c;
    return nullptr;
  }
  c->inter = inter != 0;
  if (m.Comm_set_attr(comm, key, c) != 0) {
    delete c;
    return nullptr;
  }
  return c;
}

// The state this thread found last, by handle, valid while no state was deleted since (a freed
// communicator's handle can come back for another): repeated calls skip MPI_Comm_get_attr, which
// takes the library's global lock under MPI_THREAD_MULTIPLE.
struct CommMemo {
  Raw comm = 0;
  CommCache *cache = nullptr;
  std::uint64_t generation = 0;
};
COLLTUNE_TLS CommMemo memo;

CommCache *cache_of(Raw comm) {
  const std::uint64_t now = generation.load(std::memory_order_acquire);
  if (memo.cache != nullptr && memo.comm == comm && memo.generation == now) return memo.cache;
  CommCache *c = find_cache(comm);
  if (c != nullptr) memo = CommMemo{comm, c, now};
  return c;
}

}  // namespace

long *colltune::pmpi::record_slot(Raw comm) {
  CommCache *c = cache_of(comm);
  return c != nullptr ? &c->record_id : nullptr;
}

namespace {

// ---------------------------------------------------------------------------------------------
// A call.

bool wanted() {
  static const bool on = [] {
    const char *t = std::getenv("COLLTUNE_TABLE");
    return t != nullptr && *t != 0;
  }();
  return on;
}

// A call as the runner sees it: the signature, and this rank's two buffers.
struct Call {
  int coll;
  Raw comm;
  int root = 0;
  std::int64_t size = 0;       // block bytes
  Raw datatype = 0, op = 0;    // reductions only
  const void *send = nullptr;  // as passed (may be MPI_IN_PLACE)
  void *recv = nullptr;
  // In place: where the block that stands for the missing buffer is copied from, and how long.
  std::int64_t in_place_offset = -1, in_place_bytes = 0;
  bool in_place_is_send = true;  // the copy stands for the send buffer (else for the receive buffer)
  // What makes this rank unable to run the call though the signature is fine (only the root's
  // own arguments can: a derived datatype, a size unlike the others'); null when it can.
  const char *unfit = nullptr;
};

Signature *find_signature(CommCache &c, const Call &k) {
  if (c.last < c.sigs.size() && c.sigs[c.last].is(k.coll, k.root, k.size, k.datatype, k.op)) return &c.sigs[c.last];
  for (std::size_t i = 0; i < c.sigs.size(); ++i)
    if (c.sigs[i].is(k.coll, k.root, k.size, k.datatype, k.op)) {
      c.last = i;
      return &c.sigs[i];
    }
  return nullptr;
}

unsigned long long as_python_handle(Raw h) { return static_cast<unsigned long long>(h); }

// Agree on a new signature (collective).  Null: Python failed (reported); the call passes through.
COLLTUNE_COLD Signature *add_signature(CommCache &c, const Call &k) {
  if (!python_ready()) return nullptr;
  if (c.sigs.size() >= MAX_SIGNATURES) {
    auto oldest = std::min_element(c.sigs.begin(), c.sigs.end(),
                                   [](const Signature &a, const Signature &b) { return a.last < b.last; });
    drop_signature(*oldest);
    c.sigs.erase(oldest);
  }
  PyGILState_STATE gil = PyGILState_Ensure();
  PyObject *h = PyLong_FromUnsignedLongLong(as_python_handle(c.comm));
  PyObject *d = PyLong_FromUnsignedLongLong(as_python_handle(k.datatype));
  PyObject *o = PyLong_FromUnsignedLongLong(as_python_handle(k.op));
  PyObject *res = (h && d && o) ? PyObject_CallFunction(py.resolve, "iOLiOOz", k.coll, h, static_cast<long long>(k.size),
                                                        k.root, d, o, k.unfit)
                                : nullptr;
  Py_XDECREF(h);
  Py_XDECREF(d);
  Py_XDECREF(o);
  if (res == nullptr) {
    report_python_error("colltune.pmpi.signatures.resolve failed");
    PyGILState_Release(gil);
    fail(c.comm, "cannot decide a collective call (see the Python error above)");
  }
  Signature s;
  s.coll = k.coll;
  s.root = k.root;
  s.size = k.size;
  s.datatype = k.datatype;
  s.op = k.op;
  if (res == Py_None) {
    Py_DECREF(res);
  } else {
    s.sig = res;
    PyObject *name = PyObject_GetAttrString(res, "algorithm");
    const char *text = name ? PyUnicode_AsUTF8(name) : nullptr;
    if (text == nullptr) {
      report_python_error("a signature without an algorithm name");
      PyGILState_Release(gil);
      fail(c.comm, "cannot decide a collective call (see the Python error above)");
    }
    s.algorithm = intern(text);
    Py_DECREF(name);
    PyObject *params = PyObject_GetAttrString(res, "params_json");
    const char *json = params ? PyUnicode_AsUTF8(params) : nullptr;
    if (json == nullptr) {
      report_python_error("a signature without its parameters");
      PyGILState_Release(gil);
      fail(c.comm, "cannot decide a collective call (see the Python error above)");
    }
    s.params = intern(json);
    Py_DECREF(params);
  }
  PyGILState_Release(gil);
  c.sigs.push_back(std::move(s));
  c.last = c.sigs.size() - 1;
  return &c.sigs.back();
}

inline Binding *find_binding(Signature &s, const Call &k) {
  const Raw send = reinterpret_cast<Raw>(k.send), recv = reinterpret_cast<Raw>(k.recv);
  for (Binding &b : s.bindings)
    if (b.send == send && b.recv == recv) return &b;
  return nullptr;
}

// Bind a signature to this call's buffers (local).  An in-place call binds to a buffer of its own
// that stands for the missing one.
COLLTUNE_COLD Binding *bind(CommCache &c, Signature &s, const Call &k) {
  const Raw send = reinterpret_cast<Raw>(k.send), recv = reinterpret_cast<Raw>(k.recv);
  while (c.binding_count() >= MAX_BINDINGS) {
    Signature *owner = nullptr;
    std::size_t at = 0;
    std::uint64_t best = UINT64_MAX;
    for (Signature &t : c.sigs)
      for (std::size_t i = 0; i < t.bindings.size(); ++i)
        if (t.bindings[i].last < best) {
          best = t.bindings[i].last;
          owner = &t;
          at = i;
        }
    drop_python(owner->bindings[at].keep);
    owner->bindings.erase(owner->bindings.begin() + static_cast<std::ptrdiff_t>(at));
  }
  Binding b;
  b.send = send;
  b.recv = recv;
  Raw send_at = send, recv_at = recv;
  if (k.in_place_offset >= 0) {
    b.temp.resize(static_cast<std::size_t>(std::max<std::int64_t>(k.in_place_bytes, 1)));
    const Raw temp = reinterpret_cast<Raw>(b.temp.data());
    if (k.in_place_is_send) {
      send_at = temp;
      b.copy_from = static_cast<const unsigned char *>(k.recv) + k.in_place_offset;
    } else {
      recv_at = temp;  // scatter's root: its own block stays where it is in the send buffer
    }
  }
  PyGILState_STATE gil = PyGILState_Ensure();
  PyObject *res = PyObject_CallFunction(py.bind, "OKK", s.sig, static_cast<unsigned long long>(send_at),
                                        static_cast<unsigned long long>(recv_at));
  unsigned long long fn = 0, runner = 0;
  PyObject *keep = nullptr;
  if (res == nullptr || !PyArg_ParseTuple(res, "KKO", &fn, &runner, &keep)) {
    report_python_error("colltune.pmpi.signatures.bind failed");
    PyGILState_Release(gil);
    fail(c.comm, "cannot bind a collective call to its buffers (see the Python error above)");
  }
  Py_INCREF(keep);
  Py_DECREF(res);
  PyGILState_Release(gil);
  b.keep = keep;
  b.run = reinterpret_cast<RunEntry>(fn);
  b.runner = reinterpret_cast<void *>(runner);
  s.bindings.push_back(std::move(b));
  return &s.bindings.back();
}

// Run ``k`` with colltune's runner if the table says so; false: the library must run it.
bool run(CommCache &c, const Call &k) {
  Inside guard;
  ++c.clock;
  Signature *s = find_signature(c, k);
  if (s == nullptr) {
    s = add_signature(c, k);
    if (s == nullptr) return false;
  }
  s->last = c.clock;
  if (s->sig == nullptr) return false;
  if (k.unfit != nullptr)
    fail(c.comm, std::string("the root cannot run a call that the other ranks run with colltune's algorithm (") +
                     k.unfit + "); pass the root the same datatype and size as the first call of this signature");
  Binding *b = find_binding(*s, k);
  if (b == nullptr) b = bind(c, *s, k);
  b->last = c.clock;
  if (b->copy_from != nullptr) std::memcpy(b->temp.data(), b->copy_from, static_cast<std::size_t>(k.in_place_bytes));
  char message[512];
  if (b->run(b->runner, message, sizeof message) != 0) fail(k.comm, message);
  last_algorithm = s->algorithm;
  last_params = s->params;
  return true;
}

// Set at MPI_Init where a setting is wrong and COLLTUNE_ON_ERROR=native: the library runs every call.
std::atomic<bool> stood_down{false};

// Whether this call may be run by colltune at all: the table is set and passed the check at
// MPI_Init, the library is known, and this thread is not already inside colltune.  (Called first
// by every intercepted call.)
inline bool eligible() {
  last_algorithm = NATIVE;
  return wanted() && !inside && mpi().ok && !stood_down.load(std::memory_order_relaxed);
}

// At MPI_Init, with COLLTUNE_TABLE set: the settings checked on every rank of MPI_COMM_WORLD
// (colltune.pmpi.settings.check_job), so that a bad table or variable is never ignored in
// silence: the job aborts with one line, or with COLLTUNE_ON_ERROR=native every call goes to the
// library.  A Python program (mpi4py) is skipped: the Python API reads the same settings itself,
// and its mpi4py is still being imported when it calls MPI_Init.
void check_at_init(bool python_program) {
  if (!wanted() || !mpi().ok || python_program) return;
  Inside guard;  // the check's own MPI calls go to the library
  const char *on_error = std::getenv("COLLTUNE_ON_ERROR");
  const bool native = on_error != nullptr && std::strcmp(on_error, "native") == 0;
  if (!python_ready()) {  // start_python said why, on every rank
    if (native) {
      stood_down = true;
      return;
    }
    fail(mpi().world, "cannot start Python with colltune (above), so COLLTUNE_TABLE cannot be read; set "
                      "COLLTUNE_ON_ERROR=native to run the library's own collectives instead");
  }
  PyGILState_STATE gil = PyGILState_Ensure();
  PyObject *res = PyObject_CallNoArgs(py.check);
  if (res == nullptr) {
    report_python_error("colltune.pmpi.settings.check_job failed");
    PyGILState_Release(gil);
    fail(mpi().world, "cannot check the settings (see the Python error above)");
  }
  if (res != Py_True) stood_down = true;
  Py_DECREF(res);
  PyGILState_Release(gil);
}

// Why the root's own part of a call (``bytes`` of its other buffer's block) unfits it, or null.
inline const char *root_side(std::int64_t bytes, std::int64_t want) {
  if (bytes < 0) return "a derived or non-contiguous datatype at the root";
  return bytes == want ? nullptr : "the root's send and receive blocks differ in size";
}

// The communicator's state, if colltune may run calls on it.
inline CommCache *usable(Raw comm) {
  CommCache *c = cache_of(comm);
  return c != nullptr && !c->inter ? c : nullptr;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// The intercepted collectives.  Each returns the library's result when it passes the call on, and
// MPI_SUCCESS (0) after running colltune's runner (whose MPI errors end the job, see fail()).

#define COLLTUNE_EXPORT extern "C" __attribute__((visibility("default")))

namespace {
// Call the library (PMPI_*) with this thread marked as inside a collective.
template <class F, class... A>
int library(F fn, A... args) {
  Inside guard;
  return fn(args...);
}
}  // namespace

COLLTUNE_EXPORT int MPI_Init(int *argc, char ***argv) {
  using Init = int (*)(int *, char ***);
  static const Init init = reinterpret_cast<Init>(dlsym(RTLD_NEXT, "PMPI_Init"));
  const bool python_program = Py_IsInitialized();
  const int rc = init(argc, argv);
  if (rc == 0) check_at_init(python_program);
  return rc;
}

COLLTUNE_EXPORT int MPI_Init_thread(int *argc, char ***argv, int required, int *provided) {
  using Init = int (*)(int *, char ***, int, int *);
  static const Init init = reinterpret_cast<Init>(dlsym(RTLD_NEXT, "PMPI_Init_thread"));
  const bool python_program = Py_IsInitialized();
  const int rc = init(argc, argv, required, provided);
  if (rc == 0) check_at_init(python_program);
  return rc;
}

// For tests and tools that want to know what ran (look it up with dlsym, it is there only when
// this library is preloaded): the algorithm that ran this thread's last intercepted collective,
// or "native".  The text lasts as long as the process.
COLLTUNE_EXPORT const char *colltune_pmpi_last_algorithm() { return last_algorithm; }

COLLTUNE_EXPORT int MPI_Bcast(void *buf, int count, Raw datatype, int root, Raw comm) {
  CollectiveRecord record(BCAST, comm, root, count, datatype);
  if (eligible()) {
    const Mpi &m = mpi();
    Call k{BCAST, m.handle(comm)};
    k.root = root;
    k.size = bytes_of(count, m.handle(datatype));
    k.recv = buf;
    CommCache *c = k.size >= 0 ? usable(k.comm) : nullptr;
    if (c != nullptr && run(*c, k)) return 0;
  }
  return library(mpi().Bcast, buf, count, datatype, root, comm);
}

namespace {
// scatter and gather: every rank's one block (``block``: scatter's receive buffer, gather's send
// buffer) and the root's P blocks (``whole``).  In place at the root (``block`` is MPI_IN_PLACE),
// the root's block is its own slot of the P blocks: gather sends a copy of it, scatter receives
// into a buffer of the binding and leaves it where it is.
bool run_rooted(int coll, const void *block, int block_count, Raw block_type, const void *whole, int whole_count,
                Raw whole_type, int root, Raw comm) {
  const Mpi &m = mpi();
  Call k{coll, m.handle(comm)};
  k.root = root;
  CommCache *c = usable(k.comm);
  if (c == nullptr) return false;
  const bool at_root = c->rank == root, gathers = coll == GATHER;
  const bool in_place = at_root && block == m.in_place;
  const std::int64_t whole_bytes = bytes_of(whole_count, m.handle(whole_type));
  k.size = in_place ? whole_bytes : bytes_of(block_count, m.handle(block_type));
  const void *at_whole = at_root ? whole : nullptr;
  k.send = gathers ? block : at_whole;
  k.recv = const_cast<void *>(gathers ? at_whole : block);
  if (in_place) {
    k.in_place_offset = gathers ? static_cast<std::int64_t>(root) * k.size : 0;
    k.in_place_bytes = k.size;
    k.in_place_is_send = gathers;
  } else if (at_root) {
    k.unfit = root_side(whole_bytes, k.size);
  }
  return k.size >= 0 && run(*c, k);
}

}  // namespace

COLLTUNE_EXPORT int MPI_Scatter(const void *sendbuf, int sendcount, Raw sendtype, void *recvbuf, int recvcount,
                                Raw recvtype, int root, Raw comm) {
  const bool recv_in_place = recvbuf == mpi().in_place;
  CollectiveRecord record(SCATTER, comm, root, recv_in_place ? sendcount : recvcount,
                          recv_in_place ? sendtype : recvtype);
  if (eligible() && run_rooted(SCATTER, recvbuf, recvcount, recvtype, sendbuf, sendcount, sendtype, root, comm))
    return 0;
  return library(mpi().Scatter, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
}

COLLTUNE_EXPORT int MPI_Gather(const void *sendbuf, int sendcount, Raw sendtype, void *recvbuf, int recvcount,
                               Raw recvtype, int root, Raw comm) {
  const bool send_in_place = sendbuf == mpi().in_place;
  CollectiveRecord record(GATHER, comm, root, send_in_place ? recvcount : sendcount,
                          send_in_place ? recvtype : sendtype);
  if (eligible() && run_rooted(GATHER, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm))
    return 0;
  return library(mpi().Gather, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
}

namespace {
// allgather and alltoall: the same arguments; in place, the receive buffer's own block (allgather)
// or all of it (alltoall) is what is sent.
bool run_all(int coll, const void *sendbuf, int sendcount, Raw sendtype, void *recvbuf, int recvcount, Raw recvtype,
             Raw comm) {
  const Mpi &m = mpi();
  Call k{coll, m.handle(comm)};
  CommCache *c = usable(k.comm);
  if (c == nullptr) return false;
  const bool in_place = sendbuf == m.in_place;
  const std::int64_t recv_bytes = bytes_of(recvcount, m.handle(recvtype));
  k.size = in_place ? recv_bytes : bytes_of(sendcount, m.handle(sendtype));
  if (k.size < 0 || recv_bytes != k.size) return false;
  k.send = sendbuf;
  k.recv = recvbuf;
  if (in_place) {
    const bool whole = coll == ALLTOALL;
    k.in_place_offset = whole ? 0 : static_cast<std::int64_t>(c->rank) * k.size;
    k.in_place_bytes = whole ? static_cast<std::int64_t>(c->procs) * k.size : k.size;
  }
  return run(*c, k);
}

bool run_reduction(int coll, const void *sendbuf, void *recvbuf, int count, Raw datatype, Raw op, int root, Raw comm) {
  const Mpi &m = mpi();
  Call k{coll, m.handle(comm)};
  CommCache *c = usable(k.comm);
  if (c == nullptr) return false;
  k.root = root;
  k.size = bytes_of(count, m.handle(datatype));
  if (k.size < 0) return false;
  k.datatype = m.handle(datatype);
  k.op = m.handle(op);
  const bool gets = coll == ALLREDUCE || c->rank == root;
  k.send = sendbuf;
  k.recv = gets ? recvbuf : nullptr;
  if (sendbuf == m.in_place) {
    if (!gets) return false;  // MPI_IN_PLACE away from the root is erroneous: the library says so
    k.in_place_offset = 0;
    k.in_place_bytes = k.size;
  }
  return run(*c, k);
}
}  // namespace

COLLTUNE_EXPORT int MPI_Allgather(const void *sendbuf, int sendcount, Raw sendtype, void *recvbuf, int recvcount,
                                  Raw recvtype, Raw comm) {
  const bool in_place = sendbuf == mpi().in_place;
  CollectiveRecord record(ALLGATHER, comm, 0, in_place ? recvcount : sendcount, in_place ? recvtype : sendtype);
  if (eligible() && run_all(ALLGATHER, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm)) return 0;
  return library(mpi().Allgather, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
}

COLLTUNE_EXPORT int MPI_Alltoall(const void *sendbuf, int sendcount, Raw sendtype, void *recvbuf, int recvcount,
                                 Raw recvtype, Raw comm) {
  const bool in_place = sendbuf == mpi().in_place;
  CollectiveRecord record(ALLTOALL, comm, 0, in_place ? recvcount : sendcount, in_place ? recvtype : sendtype);
  if (eligible() && run_all(ALLTOALL, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm)) return 0;
  return library(mpi().Alltoall, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
}

COLLTUNE_EXPORT int MPI_Reduce(const void *sendbuf, void *recvbuf, int count, Raw datatype, Raw op, int root,
                               Raw comm) {
  CollectiveRecord record(REDUCE, comm, root, count, datatype);
  if (eligible() && run_reduction(REDUCE, sendbuf, recvbuf, count, datatype, op, root, comm)) return 0;
  return library(mpi().Reduce, sendbuf, recvbuf, count, datatype, op, root, comm);
}

COLLTUNE_EXPORT int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, Raw datatype, Raw op, Raw comm) {
  CollectiveRecord record(ALLREDUCE, comm, 0, count, datatype);
  if (eligible() && run_reduction(ALLREDUCE, sendbuf, recvbuf, count, datatype, op, 0, comm)) return 0;
  return library(mpi().Allreduce, sendbuf, recvbuf, count, datatype, op, comm);
}

COLLTUNE_EXPORT int MPI_Barrier(Raw comm) {
  CollectiveRecord record(BARRIER, comm, 0, 0, 0);
  if (eligible()) {
    CommCache *c = usable(mpi().handle(comm));
    if (c != nullptr && run(*c, Call{BARRIER, mpi().handle(comm)})) return 0;
  }
  return library(mpi().Barrier, comm);
}
