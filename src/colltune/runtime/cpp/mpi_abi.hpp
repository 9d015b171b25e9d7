// The MPI functions colltune's compiled executor calls, found at run time in the MPI library that
// is already loaded into the process (the one mpi4py uses), for either of the two binary
// interfaces the PyPI wheels have: MPICH's (libmpi.so.12: handles are ints, also Intel MPI and
// MVAPICH) and Open MPI's (libmpi.so.40: handles are pointers).
//
// No mpi.h is included: the executor is compiled once, at install time, without any MPI
// headers, and works with whichever of the two libraries mpi4py loads, as mpi4py's own wheels do
// (MPI.mpich.so / MPI.openmpi.so).  Each ABI is a traits struct with the handle types of that
// library's mpi.h and the one constant the executor cannot get from mpi4py
// (MPI_STATUSES_IGNORE); every other handle (communicators, MPI_BYTE, datatypes, operations)
// comes from mpi4py as an integer (``.handle``) and is converted here.
//
// The function pointers have exactly the prototypes of the library's mpi.h.  ``prefix`` picks
// "MPI_" (seen by profiling tools) or "PMPI_" (for an interposition library that must not call
// itself).

#pragma once

#include <dlfcn.h>

#include <climits>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace colltune::exec {

// An MPI handle of either ABI as mpi4py hands it over (``Comm.handle`` and the like).
using Handle = std::uintptr_t;

// An error reported by the MPI library or by the executor's use of it.
class MpiFailure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct MpichAbi {
  static constexpr const char *name = "mpich";
  static constexpr const char *soname = "libmpi.so.12";
  using Comm = int;
  using Datatype = int;
  using Op = int;
  using Request = int;
  static void *statuses_ignore() { return reinterpret_cast<void *>(1); }  // (MPI_Status *)1
};

struct OpenMpiAbi {
  static constexpr const char *name = "openmpi";
  static constexpr const char *soname = "libmpi.so.40";
  using Comm = void *;
  using Datatype = void *;
  using Op = void *;
  using Request = void *;
  static void *statuses_ignore() { return nullptr; }  // (MPI_Status *)0
};

template <class T>
T to_mpi(Handle h) {
  if constexpr (std::is_pointer_v<T>) {
    return reinterpret_cast<T>(h);
  } else {
    return static_cast<T>(static_cast<std::intptr_t>(h));
  }
}

template <class T>
Handle from_mpi(T v) {
  if constexpr (std::is_pointer_v<T>) {
    return reinterpret_cast<Handle>(v);
  } else {
    return static_cast<Handle>(static_cast<std::intptr_t>(v));
  }
}

// The library's functions, typed for ABI ``A``.
template <class A>
struct Library {
  using Comm = typename A::Comm;
  using Datatype = typename A::Datatype;
  using Op = typename A::Op;
  using Request = typename A::Request;
  using Aint = std::intptr_t;  // MPI_Aint is a pointer-sized signed integer in both

  int (*Send_init)(const void *, int, Datatype, int, int, Comm, Request *);
  int (*Recv_init)(void *, int, Datatype, int, int, Comm, Request *);
  int (*Startall)(int, Request *);
  int (*Waitall)(int, Request *, void *);
  int (*Request_free)(Request *);
  int (*Bcast)(void *, int, Datatype, int, Comm);
  int (*Scatter)(const void *, int, Datatype, void *, int, Datatype, int, Comm);
  int (*Gather)(const void *, int, Datatype, void *, int, Datatype, int, Comm);
  int (*Allgather)(const void *, int, Datatype, void *, int, Datatype, Comm);
  int (*Alltoall)(const void *, int, Datatype, void *, int, Datatype, Comm);
  int (*Reduce)(const void *, void *, int, Datatype, Op, int, Comm);
  int (*Allreduce)(const void *, void *, int, Datatype, Op, Comm);
  int (*Barrier)(Comm);
  int (*Type_contiguous)(int, Datatype, Datatype *);
  int (*Type_create_struct)(int, const int *, const Aint *, const Datatype *, Datatype *);
  int (*Type_commit)(Datatype *);
  int (*Type_free)(Datatype *);
  int (*Error_string)(int, char *, int *);
  int (*Finalized)(int *);

  // Find every function in the library ``dl`` (a dlopen handle) under ``prefix``.
  Library(void *dl, const std::string &prefix) {
    find(dl, prefix, "Send_init", Send_init);
    find(dl, prefix, "Recv_init", Recv_init);
    find(dl, prefix, "Startall", Startall);
    find(dl, prefix, "Waitall", Waitall);
    find(dl, prefix, "Request_free", Request_free);
    find(dl, prefix, "Bcast", Bcast);
    find(dl, prefix, "Scatter", Scatter);
    find(dl, prefix, "Gather", Gather);
    find(dl, prefix, "Allgather", Allgather);
    find(dl, prefix, "Alltoall", Alltoall);
    find(dl, prefix, "Reduce", Reduce);
    find(dl, prefix, "Allreduce", Allreduce);
    find(dl, prefix, "Barrier", Barrier);
    find(dl, prefix, "Type_contiguous", Type_contiguous);
    find(dl, prefix, "Type_create_struct", Type_create_struct);
    find(dl, prefix, "Type_commit", Type_commit);
    find(dl, prefix, "Type_free", Type_free);
    find(dl, prefix, "Error_string", Error_string);
    find(dl, prefix, "Finalized", Finalized);
  }

  // Throw MpiFailure naming ``what`` and the library's message for a failed call.
  void check(int err, const char *what) const {
    if (err == 0) return;  // MPI_SUCCESS is 0 in every ABI
    char text[1024];
    int len = 0;
    std::string msg = std::string(what) + " failed (error " + std::to_string(err) + ")";
    if (Error_string(err, text, &len) == 0 && len > 0) msg += ": " + std::string(text, static_cast<size_t>(len));
    throw MpiFailure(msg);
  }

  bool finalized() const {
    int flag = 0;
    return Finalized(&flag) != 0 || flag != 0;
  }

 private:
  template <class F>
  static void find(void *dl, const std::string &prefix, const char *name, F &fn) {
    std::string symbol = prefix + name;
    void *p = dlsym(dl, symbol.c_str());
    if (p == nullptr) throw MpiFailure("the MPI library has no " + symbol);
    fn = reinterpret_cast<F>(p);
  }
};

// A byte count as MPI can take it: ``count`` elements of ``type``, with derived types for
// messages of more than INT_MAX bytes (the libraries of this ABI family have no large-count
// calls in common).  ``owned`` is a type this call made and its owner must free.
template <class A>
struct ByteCount {
  int count;
  typename A::Datatype type;
  bool owned;
};

// ``bytes`` bytes as (count, datatype): MPI_BYTE (``byte``) when it fits in an int, else a
// committed struct of 1 GiB blocks and the remainder.
template <class A>
ByteCount<A> byte_count(const Library<A> &mpi, typename A::Datatype byte, std::int64_t bytes) {
  if (bytes <= INT_MAX) return {static_cast<int>(bytes), byte, false};
  constexpr std::int64_t block = std::int64_t{1} << 30;
  typename A::Datatype gib{}, whole{};
  mpi.check(mpi.Type_contiguous(static_cast<int>(block), byte, &gib), "MPI_Type_contiguous");
  const int lengths[2] = {static_cast<int>(bytes / block), static_cast<int>(bytes % block)};
  const typename Library<A>::Aint displs[2] = {0, static_cast<typename Library<A>::Aint>(bytes - bytes % block)};
  const typename A::Datatype types[2] = {gib, byte};
  mpi.check(mpi.Type_create_struct(lengths[1] ? 2 : 1, lengths, displs, types, &whole), "MPI_Type_create_struct");
  mpi.check(mpi.Type_free(&gib), "MPI_Type_free");
  mpi.check(mpi.Type_commit(&whole), "MPI_Type_commit");
  return {1, whole, true};
}

// The already loaded library of ABI ``A`` (dlopen with RTLD_NOLOAD), or nullptr.
template <class A>
void *loaded_library() {
  return dlopen(A::soname, RTLD_NOW | RTLD_NOLOAD);
}

}  // namespace colltune::exec
