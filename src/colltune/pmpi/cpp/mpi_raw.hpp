// The MPI library as the interposition library sees it: its PMPI_* functions, found at run time
// (RTLD_NEXT), every handle one machine word (``Raw``; see interpose.cpp), and the per-thread
// state every intercepted call consults.  Shared by interpose.cpp (decisions) and record.cpp
// (record mode).

#pragma once

#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace colltune::pmpi {

using Raw = std::uintptr_t;

// The collectives, numbered as colltune.runtime.runners.COLLECTIVE_IDS (the order of COLLECTIVES).
enum Coll : int { BCAST, SCATTER, GATHER, ALLGATHER, ALLTOALL, REDUCE, ALLREDUCE, BARRIER, NCOLL };

// The MPI library's functions (PMPI_*), every handle a machine word.
struct Mpi {
  bool ok = false;
  bool mpich = false;
  const void *in_place = nullptr;
  int combiner_named = 0;
  int (*Bcast)(void *, int, Raw, int, Raw);
  int (*Scatter)(const void *, int, Raw, void *, int, Raw, int, Raw);
  int (*Gather)(const void *, int, Raw, void *, int, Raw, int, Raw);
  int (*Allgather)(const void *, int, Raw, void *, int, Raw, Raw);
  int (*Alltoall)(const void *, int, Raw, void *, int, Raw, Raw);
  int (*Reduce)(const void *, void *, int, Raw, Raw, int, Raw);
  int (*Allreduce)(const void *, void *, int, Raw, Raw, Raw);
  int (*Barrier)(Raw);
  // point to point and the rest, for record mode (record.cpp)
  int (*Send)(const void *, int, Raw, int, int, Raw);
  int (*Recv)(void *, int, Raw, int, int, Raw, void *);
  int (*Isend)(const void *, int, Raw, int, int, Raw, void *);  // MPI_Request *: see request()
  int (*Irecv)(void *, int, Raw, int, int, Raw, void *);
  int (*Wait)(void *, void *);
  int (*Waitall)(int, void *, void *);
  int (*Sendrecv)(const void *, int, Raw, int, int, void *, int, Raw, int, int, Raw, void *);
  int (*Finalize)();
  int (*Get_count)(const void *, Raw, int *);
  int (*Comm_group)(Raw, Raw *);
  int (*Group_translate_ranks)(Raw, int, const int *, Raw, int *);
  int (*Group_free)(Raw *);
  int (*Comm_size)(Raw, int *);
  int (*Comm_rank)(Raw, int *);
  int (*Comm_test_inter)(Raw, int *);
  int (*Type_size)(Raw, int *);
  int (*Type_get_extent)(Raw, std::intptr_t *, std::intptr_t *);
  int (*Type_get_envelope)(Raw, int *, int *, int *, int *);
  int (*Comm_create_keyval)(void *, void *, int *, void *);
  int (*Comm_get_attr)(Raw, int, void *, int *);
  int (*Comm_set_attr)(Raw, int, void *);
  int (*Abort)(Raw, int);
  // Constants of the ABI (where ``ok``): MPI_Status's size and where its source and tag are (in
  // ints), MPI_STATUS_IGNORE (= MPI_STATUSES_IGNORE), MPI_PROC_NULL, MPI_COMM_WORLD.
  int status_bytes = 0, status_source = 0, status_tag = 0;
  const void *status_ignore = nullptr;
  int proc_null = 0, any_source = 0;  // MPI_ANY_TAG is -1 in both
  Raw world = 0;

  // Request ``i`` of an array of MPI_Request (an int in MPICH's ABI, a pointer in Open MPI's).
  Raw request(const void *array, int i) const {
    if (mpich) return static_cast<Raw>(static_cast<const std::uint32_t *>(array)[i]);
    return reinterpret_cast<Raw>(static_cast<void *const *>(array)[i]);
  }

  // A handle as this library keeps it (and as mpi4py's ``handle`` shows it).
  Raw handle(Raw h) const {
    return mpich ? static_cast<Raw>(static_cast<std::uint32_t>(h)) : h;
  }
};

template <class F>
inline bool find(void *dl, const char *name, F &fn) {
  fn = reinterpret_cast<F>(dlsym(dl, name));
  return fn != nullptr;
}

inline Mpi load_mpi() {
  Mpi m;
  // The library's own collectives are the next definitions after this library's (RTLD_NEXT),
  // whatever the library; colltune runs calls only where it knows the ABI.
  void *next = RTLD_NEXT;
  const bool found = find(next, "PMPI_Bcast", m.Bcast) && find(next, "PMPI_Scatter", m.Scatter) &&
                     find(next, "PMPI_Gather", m.Gather) && find(next, "PMPI_Allgather", m.Allgather) &&
                     find(next, "PMPI_Alltoall", m.Alltoall) && find(next, "PMPI_Reduce", m.Reduce) &&
                     find(next, "PMPI_Allreduce", m.Allreduce) && find(next, "PMPI_Barrier", m.Barrier) &&
                     find(next, "PMPI_Send", m.Send) && find(next, "PMPI_Recv", m.Recv) &&
                     find(next, "PMPI_Isend", m.Isend) && find(next, "PMPI_Irecv", m.Irecv) &&
                     find(next, "PMPI_Wait", m.Wait) && find(next, "PMPI_Waitall", m.Waitall) &&
                     find(next, "PMPI_Sendrecv", m.Sendrecv) && find(next, "PMPI_Finalize", m.Finalize);
  if (!found) {
    std::fprintf(stderr, "colltune (libcolltune_pmpi.so): no MPI library is loaded after this library\n");
    std::abort();
  }
  void *dl = dlopen("libmpi.so.12", RTLD_NOW | RTLD_NOLOAD);
  m.mpich = dl != nullptr;
  if (dl != nullptr) dlclose(dl);  // only asked whether it is there (NOLOAD took a reference)
  else if ((dl = dlopen("libmpi.so.40", RTLD_NOW | RTLD_NOLOAD)) != nullptr) dlclose(dl);
  else return m;  // an ABI colltune's executor does not know: every call goes to the library
  m.in_place = m.mpich ? reinterpret_cast<const void *>(-1) : reinterpret_cast<const void *>(1);
  m.combiner_named = m.mpich ? 1 : 0;  // MPI_COMBINER_NAMED of each ABI's mpi.h
  // MPICH: {count_lo, count_hi_and_cancelled, MPI_SOURCE, MPI_TAG, MPI_ERROR}; Open MPI:
  // {MPI_SOURCE, MPI_TAG, MPI_ERROR, _cancelled, size_t _ucount}.
  m.status_bytes = m.mpich ? 20 : 24;
  m.status_source = m.mpich ? 2 : 0;
  m.status_tag = m.mpich ? 3 : 1;
  m.status_ignore = m.mpich ? reinterpret_cast<const void *>(1) : nullptr;
  m.proc_null = m.mpich ? -1 : -2;
  m.any_source = m.mpich ? -2 : -1;
  m.world = m.mpich ? Raw{0x44000000} : reinterpret_cast<Raw>(dlsym(RTLD_DEFAULT, "ompi_mpi_comm_world"));
  m.ok = find(next, "PMPI_Comm_size", m.Comm_size) && find(next, "PMPI_Comm_rank", m.Comm_rank) &&
         find(next, "PMPI_Comm_test_inter", m.Comm_test_inter) && find(next, "PMPI_Type_size", m.Type_size) &&
         find(next, "PMPI_Type_get_extent", m.Type_get_extent) &&
         find(next, "PMPI_Type_get_envelope", m.Type_get_envelope) &&
         find(next, "PMPI_Comm_create_keyval", m.Comm_create_keyval) &&
         find(next, "PMPI_Comm_get_attr", m.Comm_get_attr) && find(next, "PMPI_Comm_set_attr", m.Comm_set_attr) &&
         find(next, "PMPI_Abort", m.Abort) && find(next, "PMPI_Get_count", m.Get_count) &&
         find(next, "PMPI_Comm_group", m.Comm_group) &&
         find(next, "PMPI_Group_translate_ranks", m.Group_translate_ranks) &&
         find(next, "PMPI_Group_free", m.Group_free) && m.world != 0;
  return m;
}

inline const Mpi &mpi() {
  static const Mpi m = load_mpi();
  return m;
}

// Calls made while colltune works (Python agreeing on a signature, a runner) go straight to the
// library; so do all calls of a thread inside another intercepted call.
//
// Every thread-local variable here uses the initial-exec model (no __tls_get_addr call per
// access): the library is loaded at start-up by LD_PRELOAD, when static TLS is laid out.
#define COLLTUNE_TLS thread_local __attribute__((tls_model("initial-exec")))
// First calls, errors and bindings are out of the way of the repeated call's code (which then
// fits in a few instruction cache lines: with more ranks than cores, each call starts cold).
#define COLLTUNE_COLD __attribute__((cold, noinline))

inline COLLTUNE_TLS bool inside = false;

// What ran this thread's last intercepted call: an algorithm's name, or "native" (the library).
constexpr const char *NATIVE = "native";
inline COLLTUNE_TLS const char *last_algorithm = NATIVE;

class Inside {
 public:
  Inside() : was_(inside) { inside = true; }
  ~Inside() { inside = was_; }
  Inside(const Inside &) = delete;
  Inside &operator=(const Inside &) = delete;

 private:
  bool was_;
};

}  // namespace colltune::pmpi
