// colltune.runtime._exec: the compiled executor and the per-communicator call cache.
//
// Python builds schedules, checks arguments and agrees on them across ranks; this module runs
// what was decided, with no Python per operation:
//
//   Engine       the MPI library mpi4py loaded (either ABI, see mpi_abi.hpp), found once;
//   Program      one rank's part of a schedule, compiled into steps (program.hpp);
//   Runner       a program bound to buffers with persistent requests, or the library's own
//                collective on fixed buffers;
//   CallCache    the runners of one communicator's one-shot calls, by call key (collective,
//                algorithm, root, op, parameters and the buffers' addresses, lengths and
//                element types), least recently used first out; the engine finds it by the
//                communicator's handle until it is closed (Python closes it when the
//                communicator is freed, before MPI can reuse the handle).
//
// Engine.call is the one-shot fast path: one C++ call that finds the communicator's cache, forms
// the call key from the Python arguments and runs the cached runner; it returns False, having
// done nothing, whenever Python must decide (a first call, a new buffer, full checking on, the
// periodic table check of algorithm="auto").

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>

#include <algorithm>
#include <cstdio>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "program.hpp"

namespace nb = nanobind;
using namespace colltune::exec;

template <typename T>
using Column = nb::ndarray<const T, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

namespace {

// ---------------------------------------------------------------------------------------------
// Call keys

// A buffer argument as the key sees it: where it is, how long, its element type, writable or
// not.  Two calls with equal keys hand MPI exactly the same memory.  numpy arrays are read
// through numpy's C API (a few nanoseconds); other objects through the buffer protocol.
struct BufKey {
  enum : std::uint8_t { NONE, ARRAY, BUFFER } kind = NONE;
  bool readonly = false;
  int type = 0;  // numpy's type number, or the first character of a buffer's format
  std::uintptr_t address = 0;
  Py_ssize_t length = 0;

  bool operator==(const BufKey &o) const {
    return kind == o.kind && readonly == o.readonly && type == o.type && address == o.address && length == o.length;
  }
};

// Holds a buffer-protocol view for as long as it lives (so that a bytearray cannot be resized
// under a running collective).
class HeldBuffer {
 public:
  HeldBuffer() = default;
  HeldBuffer(const HeldBuffer &) = delete;
  HeldBuffer &operator=(const HeldBuffer &) = delete;
  ~HeldBuffer() {
    if (held_) PyBuffer_Release(&view_);
  }

  // False (with no Python error set) when ``obj`` cannot be keyed: not contiguous, or not a buffer.
  bool take(PyObject *obj, BufKey &key) {
    if (obj == Py_None) return true;
    if (PyArray_Check(obj)) {
      auto *a = reinterpret_cast<PyArrayObject *>(obj);
      if (!PyArray_ISONESEGMENT(a)) return false;
      key.kind = BufKey::ARRAY;
      key.readonly = !PyArray_ISWRITEABLE(a);
      key.type = PyArray_TYPE(a);
      key.address = reinterpret_cast<std::uintptr_t>(PyArray_DATA(a));
      key.length = PyArray_NBYTES(a);
      return true;
    }
    if (PyObject_GetBuffer(obj, &view_, PyBUF_ANY_CONTIGUOUS | PyBUF_FORMAT) != 0) {
      PyErr_Clear();
      return false;
    }
    held_ = true;
    key.kind = BufKey::BUFFER;
    key.readonly = view_.readonly != 0;
    key.type = view_.format ? static_cast<unsigned char>(view_.format[0]) | (view_.format[0] ? view_.format[1] << 8 : 0)
                            : 'B';
    key.address = reinterpret_cast<std::uintptr_t>(view_.buf);
    key.length = view_.len;
    return true;
  }

 private:
  Py_buffer view_;  // filled by PyObject_GetBuffer when held_ (not zeroed: this is on the fast path)
  bool held_ = false;
};

inline bool same(PyObject *a, PyObject *b) {
  if (a == b) return true;
  const int eq = PyObject_RichCompareBool(a, b, Py_EQ);
  if (eq < 0) {
    PyErr_Clear();
    return false;
  }
  return eq == 1;
}

// One parameter of a call: equal when the values are the same object or compare equal.
struct ParamItem {
  PyObject *name, *value;
  Py_hash_t hash;  // of the value; its address when the value is not hashable
};

// The key of a call.  A key being looked up borrows its objects from the call's arguments; a key
// kept in the cache owns references to them (``own``/``disown``).
struct CallKey {
  int collective = 0;
  long root = 0;
  PyObject *algorithm = nullptr, *op = nullptr;
  std::vector<ParamItem> params;  // sorted by name
  BufKey buf[2];
  std::size_t hash = 0;

  bool operator==(const CallKey &o) const {
    if (hash != o.hash || collective != o.collective || root != o.root || !(buf[0] == o.buf[0]) ||
        !(buf[1] == o.buf[1]) || params.size() != o.params.size())
      return false;
    if (!same(algorithm, o.algorithm) || !same(op, o.op)) return false;
    for (std::size_t i = 0; i < params.size(); ++i)
      if (!same(params[i].name, o.params[i].name) || !same(params[i].value, o.params[i].value)) return false;
    return true;
  }

  void own() const {
    Py_XINCREF(algorithm);
    Py_XINCREF(op);
    for (const ParamItem &p : params) {
      Py_INCREF(p.name);
      Py_INCREF(p.value);
    }
  }
  void disown() const {
    Py_XDECREF(algorithm);
    Py_XDECREF(op);
    for (const ParamItem &p : params) {
      Py_DECREF(p.name);
      Py_DECREF(p.value);
    }
  }
};

struct CallKeyHash {
  std::size_t operator()(const CallKey &k) const { return k.hash; }
};

inline void mix(std::size_t &h, std::size_t v) { h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2); }

// A one-shot call's arguments as Python passed them (borrowed references): collective number,
// algorithm, root (an int; 0 where the collective has none), op (None where it has none), the
// algorithm's keyword parameters, and the two buffer arguments (None where there is none).
struct CallArgs {
  int collective = 0;
  PyObject *algorithm = Py_None, *root = Py_None, *op = Py_None, *b0 = Py_None, *b1 = Py_None;
  std::vector<std::pair<PyObject *, PyObject *>> params;

  // False (no error set) when ``params`` is not a dict of str keys.
  bool take_params(PyObject *dict) {
    if (dict == Py_None) return true;
    if (!PyDict_Check(dict)) return false;
    PyObject *name, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(dict, &pos, &name, &value)) params.emplace_back(name, value);
    return true;
  }
};

// Form the key of a call; false (no error set) when an argument cannot be part of a key (Python
// then takes the call).  ``held`` keeps buffer views for the call.
bool make_key(const CallArgs &a, HeldBuffer held[2], CallKey &key) {
  if (!PyLong_CheckExact(a.root)) return false;
  key.root = PyLong_AsLong(a.root);
  if (key.root == -1 && PyErr_Occurred()) {
    PyErr_Clear();
    return false;
  }
  key.collective = a.collective;
  key.algorithm = a.algorithm;
  key.op = a.op;
  std::size_t h = static_cast<std::size_t>(a.collective) * 31u + static_cast<std::size_t>(key.root);
  for (PyObject *s : {a.algorithm, a.op}) {
    const Py_hash_t v = PyObject_Hash(s);
    if (v == -1) {
      PyErr_Clear();
      return false;
    }
    mix(h, static_cast<std::size_t>(v));
  }
  if (!a.params.empty()) {
    for (const auto &[name, value] : a.params) {
      if (!PyUnicode_CheckExact(name)) return false;
      Py_hash_t vh = PyObject_Hash(value);
      if (vh == -1) {
        PyErr_Clear();
        vh = static_cast<Py_hash_t>(reinterpret_cast<std::uintptr_t>(value));
      }
      key.params.push_back(ParamItem{name, value, vh});
    }
    std::sort(key.params.begin(), key.params.end(),
              [](const ParamItem &x, const ParamItem &y) { return PyUnicode_Compare(x.name, y.name) < 0; });
    for (const ParamItem &p : key.params) {
      mix(h, static_cast<std::size_t>(PyObject_Hash(p.name)));
      mix(h, static_cast<std::size_t>(p.hash));
    }
  }
  if (!held[0].take(a.b0, key.buf[0]) || !held[1].take(a.b1, key.buf[1])) return false;
  for (const BufKey &b : key.buf) {
    mix(h, b.address);
    mix(h, static_cast<std::size_t>(b.length));
  }
  key.hash = h;
  return true;
}

// ---------------------------------------------------------------------------------------------
// Python-facing wrappers

struct PyProgram {
  std::shared_ptr<const Program> program;
};

// Runners and caches keep the Python Engine object alive (declared first: released last), since
// they call the MPI functions it holds, and Python may tear objects down in any order at exit.
struct PyRunner {
  nb::object engine;
  std::unique_ptr<Runner> runner;

  void run() {
    if (!runner) throw MpiFailure("this runner has been released");
    nb::gil_scoped_release unlocked;
    runner->run();
  }
  void release() {
    if (runner) runner->release();
    runner.reset();
  }
};

class EngineBase;

// The cached runners of one communicator's one-shot calls.
class CallCache {
 public:
  // ``comm``: the user's communicator, whose calls this caches; ``dup``: the one runners use.
  CallCache(EngineBase *engine, Handle comm, Handle dup, bool full_check, std::size_t max_bindings, long recheck)
      : engine_(engine),
        comm_(comm),
        dup_(dup),
        full_check_(full_check),
        max_bindings_(max_bindings),
        recheck_(recheck) {}
  ~CallCache() { close(); }

  // Run the cached runner of this call, if any (fast: no Python).  ``gated`` applies the checks
  // that send a call back to Python: full checking, and the periodic table check of ``auto``.
  bool run(const CallArgs &args, bool gated) {
    if (closed_ || (gated && full_check_)) return false;
    HeldBuffer held[2];
    Binding *found = repeat(args);
    if (found == nullptr) {
      CallKey key;
      if (!make_key(args, held, key)) return false;
      auto it = map_.find(key);
      if (it == map_.end()) return false;
      found = &it->second;
      remember(args, key, found);
    }
    Binding &b = *found;
    if (b.is_auto && gated) {
      if (auto_units_ + b.units < recheck_) {
        auto_units_ += b.units;
      } else {
        // Time for the periodic table check: Python's ``on_check`` makes it (collective: every
        // rank counts the same calls) and says whether a table changed, in which case the call's
        // decision may be gone and Python takes the call.
        if (!on_check_.is_valid()) return false;
        auto_units_ = 0;
        if (nb::cast<bool>(on_check_())) return false;
      }
    }
    b.last_hit = ++clock_;
    Runner *runner = b.runner.get();
    nb::gil_scoped_release unlocked;
    runner->run();
    return true;
  }

  // Cache ``runner`` under the key of this call; it runs for calls with equal keys until the
  // group is dropped, the scratch grows, or it is the least recently used of too many.  An
  // ``is_auto`` call counts ``units`` of work towards the next table check at each run.
  void insert(const CallArgs &args, PyRunner &runner, long group, bool is_auto, long units) {
    if (closed_) throw MpiFailure("the communicator of this cache has been freed");
    if (!runner.runner) throw MpiFailure("this runner has been released");
    CallKey key;
    HeldBuffer held[2];
    if (!make_key(args, held, key)) {
      runner.release();  // cannot be found again; nothing to keep
      return;
    }
    erase(key);
    while (map_.size() >= max_bindings_) erase(least_recent());
    auto [it, ok] = map_.emplace(std::move(key), Binding{});
    it->first.own();
    Binding &b = it->second;
    b.runner = std::move(runner.runner);
    b.group = group;
    b.is_auto = is_auto;
    b.units = units;
    b.last_hit = ++clock_;
  }

  // Forget a signature: its bindings and its last use.
  void drop_group(long group) {
    std::vector<const CallKey *> doomed;
    for (auto &[k, b] : map_)
      if (b.group == group) doomed.push_back(&k);
    for (const CallKey *k : doomed) erase(*k);
    touched_.erase(group);
  }

  // Signature recency, by a clock of this communicator's calls: a call of a signature, whether
  // it runs here (its binding's last_hit) or in Python (``touch``), makes it the most recent.  Every rank sees the same
  // calls, so every rank's clock agrees, and Python drops the same least recent signature on
  // every rank.
  void touch(long group) { touched_[group] = ++clock_; }
  std::uint64_t last_use(long group) const {
    auto it = touched_.find(group);
    std::uint64_t last = it == touched_.end() ? 0 : it->second;
    for (const auto &[k, b] : map_)
      if (b.group == group) last = std::max(last, b.last_hit);
    return last;
  }

  void clear() {
    last_.binding = nullptr;
    for (auto &[k, b] : map_) {
      b.runner->release();
      k.disown();
    }
    map_.clear();
  }

  // Release everything and stop serving calls (the communicator is being freed).
  void close();

  std::size_t size() const { return map_.size(); }
  bool closed() const { return closed_; }
  bool full_check() const { return full_check_; }
  long auto_units() const { return auto_units_; }
  void set_auto_units(long n) { auto_units_ = n; }
  long recheck() const { return recheck_; }
  nb::object on_check_;  // the table check (a Python callable returning whether a table changed)
  std::size_t max_bindings() const { return max_bindings_; }
  Handle dup() const { return dup_; }
  EngineBase *engine() const { return engine_; }

 private:
  // The last call that ran from the cache, by the identity of its argument objects: a call that
  // passes the very same objects (the usual loop) skips the key and the hash table, once its
  // buffers are seen to be where they were.  It holds the algorithm, root and op objects, so that
  // the same address means the same object; it holds no buffer, but only a numpy array whose
  // memory, type and flags match the last call's passes for it.
  struct LastCall {
    const void *binding = nullptr;
    int collective = 0;
    nb::object algorithm, root, op;
    PyObject *b0 = nullptr, *b1 = nullptr;
    BufKey buf[2];
  };

  struct Binding;
  Binding *repeat(const CallArgs &a) {
    if (last_.binding == nullptr || !a.params.empty() || a.collective != last_.collective ||
        a.algorithm != last_.algorithm.ptr() || a.root != last_.root.ptr() || a.op != last_.op.ptr() ||
        a.b0 != last_.b0 || a.b1 != last_.b1)
      return nullptr;
    PyObject *objs[2] = {a.b0, a.b1};
    for (int i = 0; i < 2; ++i) {
      const BufKey &k = last_.buf[i];
      if (k.kind == BufKey::NONE) {
        if (objs[i] != Py_None) return nullptr;
        continue;
      }
      if (k.kind != BufKey::ARRAY || !PyArray_Check(objs[i])) return nullptr;  // other buffers: the full key
      auto *arr = reinterpret_cast<PyArrayObject *>(objs[i]);
      if (reinterpret_cast<std::uintptr_t>(PyArray_DATA(arr)) != k.address || PyArray_NBYTES(arr) != k.length ||
          PyArray_TYPE(arr) != k.type || !PyArray_ISONESEGMENT(arr) || !PyArray_ISWRITEABLE(arr) != k.readonly)
        return nullptr;
    }
    return static_cast<Binding *>(const_cast<void *>(last_.binding));
  }
  void remember(const CallArgs &a, const CallKey &key, Binding *b) {
    if (!a.params.empty()) return;
    last_ = LastCall{b,    a.collective, nb::borrow(a.algorithm), nb::borrow(a.root), nb::borrow(a.op),
                     a.b0, a.b1,         {key.buf[0], key.buf[1]}};
  }

  struct Binding {
    std::unique_ptr<Runner> runner;
    long group = 0;
    std::uint64_t last_hit = 0;  // the clock when it last ran (or was kept)
    bool is_auto = false;
    long units = 1;
  };

  // The key of the binding that ran least recently (the map is not empty).
  const CallKey &least_recent() const {
    auto best = map_.begin();
    for (auto it = map_.begin(); it != map_.end(); ++it)
      if (it->second.last_hit < best->second.last_hit) best = it;
    return best->first;
  }

  void erase(const CallKey &key) {
    auto it = map_.find(key);
    if (it == map_.end()) return;
    last_.binding = nullptr;
    it->second.runner->release();
    it->first.disown();
    map_.erase(it);
  }

  EngineBase *engine_;
  Handle comm_, dup_;
  bool full_check_;
  std::size_t max_bindings_;
  long recheck_;
  long auto_units_ = 0;  // work of the "auto" calls since the last table check (see insert's units)
  bool closed_ = false;
  std::unordered_map<CallKey, Binding, CallKeyHash> map_;
  LastCall last_;
  std::unordered_map<long, std::uint64_t> touched_;  // signatures' calls taken by Python, by group
  std::uint64_t clock_ = 0;
};

// The MPI library, through one ABI, and the call caches of the communicators by handle.
class EngineBase {
 public:
  virtual ~EngineBase() = default;
  virtual const char *abi() const = 0;
  virtual std::unique_ptr<Runner> bind(std::shared_ptr<const Program> program, Handle comm, unsigned char *send,
                                       unsigned char *recv, unsigned char *scratch) = 0;
  virtual std::unique_ptr<Runner> native(const NativeCall &call, Handle comm, const unsigned char *send,
                                         unsigned char *recv) = 0;
  // The handle of ``comm`` (an mpi4py Comm, or None for MPI_COMM_WORLD); false when ``comm`` is
  // not a communicator (Python error cleared).
  virtual bool handle(PyObject *comm, Handle &h) const = 0;

  // The cache of the communicator with handle ``h``, or nullptr.  A cache is found by handle
  // only while it is open: closing it (when its communicator is freed, before the handle can be
  // reused) forgets it.
  CallCache *find(Handle h) {
    if (h == last_handle_ && last_cache_ != nullptr) return last_cache_;
    auto it = caches_.find(h);
    if (it == caches_.end()) return nullptr;
    last_handle_ = h;
    last_cache_ = it->second;
    return it->second;
  }
  void remember(Handle h, CallCache *cache) {
    caches_[h] = cache;
    last_cache_ = nullptr;
  }
  void forget(Handle h, const CallCache *cache) {
    auto it = caches_.find(h);
    if (it != caches_.end() && it->second == cache) caches_.erase(it);
    last_cache_ = nullptr;
  }

 private:
  std::unordered_map<Handle, CallCache *> caches_;
  Handle last_handle_ = 0;  // the last cache found, by handle (forgotten whenever a cache comes or goes)
  CallCache *last_cache_ = nullptr;
};

void CallCache::close() {
  if (closed_) return;
  on_check_ = nb::object();  // it refers back to the Python state that holds this cache
  clear();
  closed_ = true;
  engine_->forget(comm_, this);
}

using CommGet = void *(*)(PyObject *);  // mpi4py's PyMPIComm_Get: the address of the handle

template <class A>
class Engine final : public EngineBase {
 public:
  Engine(void *dl, const std::string &prefix, Handle byte, Handle world, CommGet comm_get)
      : mpi_(dl, prefix), byte_(byte), world_(world), comm_get_(comm_get) {}

  const char *abi() const override { return A::name; }

  std::unique_ptr<Runner> bind(std::shared_ptr<const Program> program, Handle comm, unsigned char *send,
                               unsigned char *recv, unsigned char *scratch) override {
    unsigned char *const base[3] = {send, recv, scratch};
    return std::make_unique<ScheduleRunner<A>>(mpi_, std::move(program), comm, byte_, base);
  }

  std::unique_ptr<Runner> native(const NativeCall &call, Handle comm, const unsigned char *send,
                                 unsigned char *recv) override {
    return std::make_unique<NativeRunner<A>>(mpi_, call, comm, byte_, send, recv);
  }

  bool handle(PyObject *comm, Handle &h) const override {
    if (comm == Py_None) {
      h = world_;
      return true;
    }
    void *p = comm_get_(comm);
    if (p == nullptr) {
      PyErr_Clear();
      return false;
    }
    h = from_mpi(*static_cast<typename A::Comm *>(p));
    return true;
  }

 private:
  Library<A> mpi_;
  Handle byte_, world_;
  CommGet comm_get_;
};

// ---------------------------------------------------------------------------------------------
// One-shot fronts: builtin functions (METH_FASTCALL) that stand for the Python one-shot
// functions.  A front reads its arguments by the Python function's parameter names, and runs the
// call from the communicator's cache when it can (Python is not entered at all); otherwise it
// calls the Python function with exactly the arguments it got.

struct Front {
  static constexpr std::size_t MAX = 8;  // named parameters (reduce has 6)
  nb::object owner;  // the Python Engine object, kept alive while the front can call into it
  EngineBase *engine = nullptr;
  nb::object fn;
  int collective = 0;
  std::size_t n = 0;
  PyObject *names[MAX] = {};     // interned; owned
  PyObject *defaults[MAX] = {};  // owned; null: a parameter without a default
  int buf0 = -1, buf1 = -1, root = -1, op = -1, comm = -1, algorithm = -1;
  std::string name, doc;
  PyMethodDef def{};

  Front() = default;
  Front(const Front &) = delete;
  Front &operator=(const Front &) = delete;
  ~Front() {
    for (std::size_t i = 0; i < n; ++i) {
      Py_XDECREF(names[i]);
      Py_XDECREF(defaults[i]);
    }
  }

  int index(PyObject *kw) const {
    for (std::size_t i = 0; i < n; ++i)
      if (names[i] == kw) return static_cast<int>(i);
    for (std::size_t i = 0; i < n; ++i)
      if (PyUnicode_Compare(names[i], kw) == 0) return static_cast<int>(i);
    return -1;
  }
};

constexpr const char *FRONT_CAPSULE = nullptr;  // unnamed: PyCapsule_GetPointer then compares no string

PyObject *ZERO = nullptr;  // the int 0, the root of collectives that have none (set at import)

PyObject *front_call(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
  auto *f = static_cast<Front *>(PyCapsule_GetPointer(self, FRONT_CAPSULE));
  constexpr std::size_t MAX = Front::MAX;
  const std::size_t n = f->n;
  PyObject *slot[MAX];
  bool ran = false;
  if (static_cast<std::size_t>(nargs) <= n && n <= MAX) {
    CallArgs call;
    bool ok = true;
    for (std::size_t i = 0; i < n; ++i) slot[i] = i < static_cast<std::size_t>(nargs) ? args[i] : nullptr;
    const Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t k = 0; k < nkw && ok; ++k) {
      PyObject *kw = PyTuple_GET_ITEM(kwnames, k);
      const int i = f->index(kw);
      if (i < 0) {
        call.params.emplace_back(kw, args[nargs + k]);
      } else if (slot[i] != nullptr) {
        ok = false;  // given twice: Python says so
      } else {
        slot[i] = args[nargs + k];
      }
    }
    for (std::size_t i = 0; i < n; ++i)
      if (slot[i] == nullptr) {
        slot[i] = f->defaults[i];
        if (slot[i] == nullptr) ok = false;  // a required argument is missing
      }
    if (ok) {
      Handle h = 0;
      CallCache *cache = nullptr;
      if (f->engine->handle(f->comm >= 0 ? slot[f->comm] : Py_None, h)) cache = f->engine->find(h);
      if (cache != nullptr) {
        call.collective = f->collective;
        call.algorithm = slot[f->algorithm];
        call.root = f->root >= 0 ? slot[f->root] : ZERO;
        call.op = f->op >= 0 ? slot[f->op] : Py_None;
        call.b0 = f->buf0 >= 0 ? slot[f->buf0] : Py_None;
        call.b1 = f->buf1 >= 0 ? slot[f->buf1] : Py_None;
        try {
          ran = cache->run(call, true);
        } catch (nb::python_error &e) {
          e.restore();
          return nullptr;
        } catch (const MpiFailure &e) {
          PyObject *errors = PyImport_ImportModule("colltune.errors");
          if (errors != nullptr) {
            PyObject *type = PyObject_GetAttrString(errors, "ExecutionError");
            if (type != nullptr) PyErr_SetString(type, e.what());
            Py_XDECREF(type);
            Py_DECREF(errors);
          }
          return nullptr;
        }
      }
    }
  }
  if (ran) Py_RETURN_NONE;
  return PyObject_Vectorcall(f->fn.ptr(), args, static_cast<std::size_t>(nargs), kwnames);
}

nb::object make_front(nb::object owner, EngineBase *engine, nb::object fn, int collective, const std::vector<std::string> &names,
                      const std::vector<nb::object> &defaults, const std::vector<bool> &required,
                      const std::string &signature) {
  if (names.size() != defaults.size() || names.size() != required.size() || names.size() > Front::MAX)
    throw MpiFailure("bad front parameters");
  auto front = std::make_unique<Front>();
  front->owner = owner;
  front->engine = engine;
  front->fn = fn;
  front->collective = collective;
  for (std::size_t i = 0; i < names.size(); ++i) {
    PyObject *s = PyUnicode_InternFromString(names[i].c_str());
    if (s == nullptr) throw nb::python_error();
    front->names[i] = s;
    front->defaults[i] = required[i] ? nullptr : defaults[i].inc_ref().ptr();
    front->n = i + 1;
    const std::string &p = names[i];
    const int k = static_cast<int>(i);
    if (p == "buf" || p == "sendbuf") front->buf0 = k;
    if (p == "recvbuf") front->buf1 = k;
    if (p == "root") front->root = k;
    if (p == "op") front->op = k;
    if (p == "comm") front->comm = k;
    if (p == "algorithm") front->algorithm = k;
  }
  if (front->algorithm < 0) throw MpiFailure("a front needs an 'algorithm' parameter");
  front->name = nb::cast<std::string>(fn.attr("__name__"));
  nb::object doc = fn.attr("__doc__");
  front->doc = signature + "\n--\n\n" + (doc.is_none() ? std::string() : nb::cast<std::string>(doc));
  front->def.ml_name = front->name.c_str();
  front->def.ml_meth = reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&front_call));
  front->def.ml_flags = METH_FASTCALL | METH_KEYWORDS;
  front->def.ml_doc = front->doc.c_str();
  Front *raw = front.get();
  PyObject *capsule = PyCapsule_New(raw, FRONT_CAPSULE, [](PyObject *c) {
    delete static_cast<Front *>(PyCapsule_GetPointer(c, FRONT_CAPSULE));
  });
  if (capsule == nullptr) throw nb::python_error();
  front.release();
  nb::object self = nb::steal(capsule);
  nb::object module = fn.attr("__module__");
  PyObject *f = PyCFunction_NewEx(&raw->def, self.ptr(), module.ptr());
  if (f == nullptr) throw nb::python_error();
  return nb::steal(f);
}

struct PyEngine {
  std::unique_ptr<EngineBase> engine;
};

struct PyCache {
  nb::object engine;
  std::unique_ptr<CallCache> cache;
  CallCache &get() {
    if (!cache) throw MpiFailure("this cache has been closed");
    return *cache;
  }
};

unsigned char *ptr(std::uintptr_t address) { return reinterpret_cast<unsigned char *>(address); }

// Runner.entry: how C++ outside this module (the interposition library, colltune.pmpi) runs a
// runner without Python: ``run_entry(runner, message, capacity)`` returns 0, or 1 with the error
// in ``message``.  Only the address crosses the module boundary, not the Runner class.
int run_entry(void *runner, char *message, std::size_t capacity) noexcept {
  try {
    static_cast<Runner *>(runner)->run();
    return 0;
  } catch (const std::exception &e) {
    std::snprintf(message, capacity, "%s", e.what());
  } catch (...) {
    std::snprintf(message, capacity, "unknown error in colltune's executor");
  }
  return 1;
}

}  // namespace

// The arguments that make a call key; any of them may be None.
#define KEY_ARGS                                                                                          \
  nb::arg("collective"), nb::arg("algorithm").none(), nb::arg("root").none(), nb::arg("op").none(),       \
      nb::arg("params").none(), nb::arg("buf0").none(), nb::arg("buf1").none()

NB_MODULE(_exec, m) {
  m.doc() = "colltune's compiled executor and call cache (see colltune.runtime.compiled).";
  // Call caches live in MPI attributes of communicators that are never freed (MPI_COMM_WORLD), so
  // some are still alive when the interpreter exits; that is not a leak to report.
  nb::set_leak_warnings(false);
  if (_import_array() < 0) throw nb::python_error();
  ZERO = PyLong_FromLong(0);
  m.def("memmove_aliases", &memmove_aliases,
        "True if this machine's memmove is slowed by 4K aliasing, so that the executor copies such regions "
        "backwards (measured once, at import).");
  memmove_aliases();

  nb::class_<PyProgram>(m, "Program", "One rank's part of a schedule, compiled into steps.")
      .def_prop_ro("steps", [](const PyProgram &p) { return p.program->steps().size(); })
      .def_prop_ro("messages", [](const PyProgram &p) { return p.program->messages().size(); })
      .def_prop_ro("scratch_bytes", [](const PyProgram &p) { return p.program->bytes(SCRATCH_BUF); });

  nb::class_<PyRunner>(m, "Runner", "A collective call on fixed buffers: run() it, release() it.")
      .def("run", &PyRunner::run, "Perform the call once (every rank of the communicator must).")
      .def("release", &PyRunner::release, "Free the persistent requests (idempotent).")
      .def_prop_ro("released", [](const PyRunner &r) { return !r.runner; })
      .def_prop_ro(
          "entry",
          [](const PyRunner &r) {
            if (!r.runner) throw MpiFailure("this runner has been released");
            return std::make_pair(reinterpret_cast<std::uintptr_t>(&run_entry),
                                  reinterpret_cast<std::uintptr_t>(r.runner.get()));
          },
          "(function, runner) addresses for C++ callers: ``int function(void *runner, char *message, size_t "
          "capacity)`` runs it without Python (0: done; 1: failed, message written).  Valid while the runner "
          "is held and not released.");

  nb::class_<PyCache>(m, "CallCache", "The runners of one communicator's one-shot calls.")
      .def("run",
           [](PyCache &c, int coll, nb::handle alg, nb::handle root, nb::handle op, nb::handle params, nb::handle b0,
              nb::handle b1) {
             CallArgs args{coll, alg.ptr(), root.ptr(), op.ptr(), b0.ptr(), b1.ptr(), {}};
             return args.take_params(params.ptr()) && c.get().run(args, false);
           },
           KEY_ARGS, "Run the cached runner of this call if there is one; return whether it ran.")
      .def("insert",
           [](PyCache &c, int coll, nb::handle alg, nb::handle root, nb::handle op, nb::handle params, nb::handle b0,
              nb::handle b1, PyRunner &runner, long group, bool is_auto, long units) {
             CallArgs args{coll, alg.ptr(), root.ptr(), op.ptr(), b0.ptr(), b1.ptr(), {}};
             if (!args.take_params(params.ptr())) return runner.release();
             c.get().insert(args, runner, group, is_auto, units);
           },
           KEY_ARGS, nb::arg("runner"), nb::arg("group"), nb::arg("is_auto"), nb::arg("units"), "Keep ``runner`` (moved out of its wrapper) for calls with this key.")
      .def("bind",
           [](PyCache &c, const PyProgram &p, std::uintptr_t send, std::uintptr_t recv, std::uintptr_t scratch) {
             CallCache &cache = c.get();
             return PyRunner{c.engine,
                             cache.engine()->bind(p.program, cache.dup(), ptr(send), ptr(recv), ptr(scratch))};
           },
           "Bind a program to the cache's communicator and buffers at these addresses.")
      .def("native",
           [](PyCache &c, int coll, std::int64_t block, int root, std::int64_t count, std::uintptr_t datatype,
              std::uintptr_t op, std::uintptr_t send, std::uintptr_t recv) {
             CallCache &cache = c.get();
             return PyRunner{c.engine, cache.engine()->native(NativeCall{coll, block, root, count, datatype, op},
                                                              cache.dup(), ptr(send), ptr(recv))};
           },
           "The library's own collective on buffers at these addresses.")
      .def("drop_group", [](PyCache &c, long group) { c.get().drop_group(group); })
      .def("touch", [](PyCache &c, long group) { c.get().touch(group); }, "Mark a signature as just called.")
      .def("last_use", [](PyCache &c, long group) { return c.get().last_use(group); },
           "When a signature was last called, by the cache's call clock (0: never).")
      .def("clear", [](PyCache &c) { c.get().clear(); })
      .def("close",
           [](PyCache &c) {
             if (c.cache) c.cache->close();
           },
           "Release every runner; no call runs from this cache again.")
      .def_prop_ro("size", [](PyCache &c) { return c.get().size(); })
      .def_prop_ro("closed", [](PyCache &c) { return !c.cache || c.cache->closed(); })
      .def_prop_ro("full_check", [](PyCache &c) { return c.get().full_check(); })
      .def_prop_ro("recheck", [](PyCache &c) { return c.get().recheck(); })
      .def_prop_ro("max_bindings", [](PyCache &c) { return c.get().max_bindings(); })
      .def_prop_rw(
          "on_check", [](PyCache &c) { return c.get().on_check_; },
          [](PyCache &c, nb::object f) { c.get().on_check_ = std::move(f); }, nb::arg("on_check").none(),
          "Called (no arguments) when the ``auto`` calls run from the cache reach the next table check; "
          "returns whether a table changed.")
      .def_prop_rw(
          "auto_units", [](PyCache &c) { return c.get().auto_units(); },
          [](PyCache &c, long n) { c.get().set_auto_units(n); });

  nb::class_<PyEngine>(m, "Engine", "The MPI library that mpi4py loaded, seen through its ABI.")
      .def(
          "__init__",
          [](PyEngine *self, const std::string &abi, std::uintptr_t byte, std::uintptr_t world, nb::object capsule,
             const std::string &prefix) {
            void *get = PyCapsule_GetPointer(capsule.ptr(), PyCapsule_GetName(capsule.ptr()));
            if (get == nullptr) throw nb::python_error();
            std::unique_ptr<EngineBase> e;
            if (abi == MpichAbi::name || abi == OpenMpiAbi::name) {
              void *dl = abi == MpichAbi::name ? loaded_library<MpichAbi>() : loaded_library<OpenMpiAbi>();
              if (dl == nullptr)
                throw MpiFailure(std::string("no ") + (abi == MpichAbi::name ? MpichAbi::soname : OpenMpiAbi::soname) +
                                 " is loaded in this process");
              if (abi == MpichAbi::name)
                e = std::make_unique<Engine<MpichAbi>>(dl, prefix, byte, world, reinterpret_cast<CommGet>(get));
              else
                e = std::make_unique<Engine<OpenMpiAbi>>(dl, prefix, byte, world, reinterpret_cast<CommGet>(get));
            } else {
              throw MpiFailure("unsupported MPI ABI '" + abi + "' (supported: mpich, openmpi)");
            }
            new (self) PyEngine{std::move(e)};
          },
          nb::arg("abi"), nb::arg("byte"), nb::arg("world"), nb::arg("comm_get"), nb::arg("prefix") = "MPI_",
          "Find the library of ``abi`` in this process; ``byte`` and ``world`` are the handles of MPI_BYTE and "
          "MPI_COMM_WORLD, ``comm_get`` mpi4py's PyMPIComm_Get capsule.")
      .def_prop_ro("abi", [](const PyEngine &e) { return std::string(e.engine->abi()); })
      .def(
          "program",
          [](PyEngine &, Column<std::int8_t> kind, Column<std::int32_t> peer, Column<std::int32_t> tag,
             Column<std::int8_t> buf, Column<std::int64_t> offset, Column<std::int64_t> length,
             Column<std::int8_t> src_buf, Column<std::int64_t> src_offset, Column<std::int8_t> redop,
             Column<std::int8_t> dtype, Column<double> delay, Column<std::int64_t> req_ptr,
             Column<std::int64_t> req_idx, std::int64_t send_bytes, std::int64_t recv_bytes,
             std::int64_t scratch_bytes) {
            const std::size_t n = kind.shape(0);
            for (std::size_t len : {peer.shape(0), tag.shape(0), buf.shape(0), offset.shape(0), length.shape(0),
                                    src_buf.shape(0), src_offset.shape(0), redop.shape(0), dtype.shape(0),
                                    delay.shape(0)})
              if (len != n) throw MpiFailure("schedule columns of different lengths");
            if (req_ptr.shape(0) != n + 1 || (n > 0 && static_cast<std::size_t>(req_ptr.data()[n]) > req_idx.shape(0)))
              throw MpiFailure("bad dependency arrays");
            RankOps ops{n,           kind.data(),       buf.data(),   src_buf.data(), redop.data(),
                        dtype.data(), peer.data(),      tag.data(),   offset.data(),  length.data(),
                        src_offset.data(), delay.data(), req_ptr.data(), req_idx.data()};
            return PyProgram{std::make_shared<const Program>(ops, send_bytes, recv_bytes, scratch_bytes)};
          },
          "Compile one rank's operations (columns sliced to the rank; dependencies as local indices).")
      .def(
          "bind",
          [](PyEngine &e, const PyProgram &p, std::uintptr_t comm, std::uintptr_t send, std::uintptr_t recv,
             std::uintptr_t scratch) {
            return PyRunner{nb::borrow(nb::find(&e)), e.engine->bind(p.program, comm, ptr(send), ptr(recv), ptr(scratch))};
          },
          "Bind a program to a communicator (handle) and buffers (addresses), making its persistent requests.")
      .def(
          "native",
          [](PyEngine &e, int coll, std::int64_t block, int root, std::int64_t count, std::uintptr_t datatype,
             std::uintptr_t op, std::uintptr_t comm, std::uintptr_t send, std::uintptr_t recv) {
            return PyRunner{nb::borrow(nb::find(&e)),
                            e.engine->native(NativeCall{coll, block, root, count, datatype, op}, comm, ptr(send),
                                             ptr(recv))};
          },
          "The library's own collective on a communicator (handle) and buffers (addresses).")
      .def(
          "cache",
          [](PyEngine &e, std::uintptr_t comm, std::uintptr_t dup, bool full_check, std::size_t max_bindings,
             long recheck) {
            auto cache = std::make_unique<CallCache>(e.engine.get(), comm, dup, full_check, max_bindings, recheck);
            e.engine->remember(comm, cache.get());
            return PyCache{nb::borrow(nb::find(&e)), std::move(cache)};
          },
          nb::arg("comm"), nb::arg("dup"), nb::arg("full_check"), nb::arg("max_bindings"), nb::arg("recheck"),
          "A call cache for the communicator ``comm`` (handle) whose runners use ``dup``; Engine.call finds it by "
          "``comm`` until it is closed.")
      .def(
          "front",
          [](PyEngine &e, nb::object fn, int collective, std::vector<std::string> names,
             std::vector<nb::object> defaults, std::vector<bool> required, const std::string &signature) {
            return make_front(nb::borrow(nb::find(&e)), e.engine.get(), fn, collective, names, defaults, required, signature);
          },
          nb::arg("fn"), nb::arg("collective"), nb::arg("names"), nb::arg("defaults"), nb::arg("required"),
          nb::arg("signature"),
          "A builtin function that runs a one-shot call from its communicator's call cache when it can and "
          "otherwise calls ``fn`` with the same arguments; ``names``/``defaults`` are ``fn``'s named parameters.");

  nb::register_exception_translator(
      [](const std::exception_ptr &p, void *) {
        try {
          std::rethrow_exception(p);
        } catch (const MpiFailure &e) {
          nb::object errors = nb::module_::import_("colltune.errors");
          PyErr_SetString(errors.attr("ExecutionError").ptr(), e.what());
        }
      },
      nullptr);
}
