// The elementwise reductions of a schedule's REDUCE operations: dst = src op dst, with src the
// left operand as in MPI_Reduce_local, for the operations of colltune.schedule.REDUCTION_OPS over
// the dtypes of colltune.schedule.REDUCTION_DTYPES (indices here are the same).
//
// The results are numpy's, bit for bit, since the Python executor applies ``ufunc(src, dst,
// out=dst)`` and both executors must agree: integers wrap around; logical operations give 1 or 0
// in the buffer's type; max and min of floats propagate NaN (numpy's maximum/minimum, not fmax);
// bool sums are logical ors and products logical ands.  Complex products use numpy's formula
// (re = ar br - ai bi, im = ar bi + ai br) without fused multiply-adds; numpy itself uses them on
// CPUs that have them, so there the two may differ in the last bit of a part.
// Operations that colltune.collectives rejects for a dtype (bitwise on floats, max on complex)
// have no function.

#pragma once

#include <cmath>
#include <complex>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace colltune::exec {

using ReduceFn = void (*)(unsigned char *dst, const unsigned char *src, std::size_t bytes);

namespace reduce_detail {

enum OpIndex { SUM, PROD, MAX, MIN, BAND, BOR, BXOR, LAND, LOR, NUM_OPS };
constexpr int NUM_DTYPES = 13;

template <class T>
struct Complex {
  T re, im;
};

// numpy's bool: one byte, read as true when nonzero, written as 0 or 1.
struct Bool8 {
  std::uint8_t v;
};

template <class T>
inline bool nonzero(T v) {
  return v != T(0);
}
template <class T>
inline bool nonzero(Complex<T> v) {
  return v.re != T(0) || v.im != T(0);
}

template <class T>
inline T from_bool(bool b) {
  return b ? T(1) : T(0);
}

// One element: ``a`` is src (left operand), ``b`` is dst.
template <int OP, class T>
inline T combine(T a, T b) {
  if constexpr (std::is_same_v<T, Bool8>) {
    const bool x = a.v != 0, y = b.v != 0;
    if constexpr (OP == SUM || OP == MAX || OP == BOR || OP == LOR) return Bool8{x || y};
    if constexpr (OP == PROD || OP == MIN || OP == BAND || OP == LAND) return Bool8{x && y};
    if constexpr (OP == BXOR) return Bool8{x != y};
  } else if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    if constexpr (OP == SUM) return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
    if constexpr (OP == PROD) return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
    if constexpr (OP == MAX) return a >= b ? a : b;
    if constexpr (OP == MIN) return a <= b ? a : b;
    if constexpr (OP == BAND) return static_cast<T>(a & b);
    if constexpr (OP == BOR) return static_cast<T>(a | b);
    if constexpr (OP == BXOR) return static_cast<T>(a ^ b);
    if constexpr (OP == LAND) return from_bool<T>(a && b);
    if constexpr (OP == LOR) return from_bool<T>(a || b);
  } else if constexpr (std::is_floating_point_v<T>) {
    if constexpr (OP == SUM) return a + b;
    if constexpr (OP == PROD) return a * b;
    if constexpr (OP == MAX) return (a >= b || std::isnan(a)) ? a : b;
    if constexpr (OP == MIN) return (a <= b || std::isnan(a)) ? a : b;
    if constexpr (OP == LAND) return from_bool<T>(nonzero(a) && nonzero(b));
    if constexpr (OP == LOR) return from_bool<T>(nonzero(a) || nonzero(b));
  } else {  // Complex<R>
    using R = decltype(a.re);
    if constexpr (OP == SUM) return T{a.re + b.re, a.im + b.im};
    if constexpr (OP == PROD) return T{a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re};
    if constexpr (OP == LAND) return T{from_bool<R>(nonzero(a) && nonzero(b)), R(0)};
    if constexpr (OP == LOR) return T{from_bool<R>(nonzero(a) || nonzero(b)), R(0)};
  }
}

template <int OP, class T>
constexpr bool defined() {
  if constexpr (std::is_same_v<T, Bool8>) return true;
  // As MPI (4.0, section 6.9.2): bitwise and logical operations on integers and booleans only.
  if constexpr (std::is_floating_point_v<T>) return OP == SUM || OP == PROD || OP == MAX || OP == MIN;
  if constexpr (!std::is_integral_v<T>) return OP == SUM || OP == PROD;  // complex
  return true;
}

template <int OP, class T>
void apply(unsigned char *dst, const unsigned char *src, std::size_t bytes) {
  const std::size_t n = bytes / sizeof(T);
  const bool aligned = reinterpret_cast<std::uintptr_t>(dst) % alignof(T) == 0 &&
                       reinterpret_cast<std::uintptr_t>(src) % alignof(T) == 0;
  if (aligned && dst != src) {  // the usual case: typed, not aliased, so the compiler vectorises it
    T *__restrict d = reinterpret_cast<T *>(dst);
    const T *__restrict s = reinterpret_cast<const T *>(src);
    for (std::size_t i = 0; i < n; ++i) d[i] = combine<OP, T>(s[i], d[i]);
    return;
  }
  for (std::size_t i = 0; i < n; ++i) {
    T a, b;
    std::memcpy(&a, src + i * sizeof(T), sizeof(T));
    std::memcpy(&b, dst + i * sizeof(T), sizeof(T));
    const T r = combine<OP, T>(a, b);
    std::memcpy(dst + i * sizeof(T), &r, sizeof(T));
  }
}

template <int OP, class T>
constexpr ReduceFn entry() {
  if constexpr (defined<OP, T>()) {
    return &apply<OP, T>;
  } else {
    return nullptr;
  }
}

template <int OP>
constexpr void fill_row(ReduceFn *row) {
  // The order of colltune.schedule.REDUCTION_DTYPES.
  row[0] = entry<OP, std::int8_t>();
  row[1] = entry<OP, std::uint8_t>();
  row[2] = entry<OP, std::int16_t>();
  row[3] = entry<OP, std::uint16_t>();
  row[4] = entry<OP, std::int32_t>();
  row[5] = entry<OP, std::uint32_t>();
  row[6] = entry<OP, std::int64_t>();
  row[7] = entry<OP, std::uint64_t>();
  row[8] = entry<OP, float>();
  row[9] = entry<OP, double>();
  row[10] = entry<OP, Complex<float>>();
  row[11] = entry<OP, Complex<double>>();
  row[12] = entry<OP, Bool8>();
}

struct Table {
  ReduceFn fn[NUM_OPS][NUM_DTYPES];
  constexpr Table() : fn{} {
    fill_row<SUM>(fn[SUM]);
    fill_row<PROD>(fn[PROD]);
    fill_row<MAX>(fn[MAX]);
    fill_row<MIN>(fn[MIN]);
    fill_row<BAND>(fn[BAND]);
    fill_row<BOR>(fn[BOR]);
    fill_row<BXOR>(fn[BXOR]);
    fill_row<LAND>(fn[LAND]);
    fill_row<LOR>(fn[LOR]);
  }
};

inline constexpr Table TABLE{};

}  // namespace reduce_detail

// The function of operation ``op`` over dtype ``dtype`` (indices of REDUCTION_OPS and
// REDUCTION_DTYPES), or nullptr where the pair is undefined or out of range.
inline ReduceFn reduce_function(int op, int dtype) {
  using namespace reduce_detail;
  if (op < 0 || op >= NUM_OPS || dtype < 0 || dtype >= NUM_DTYPES) return nullptr;
  return TABLE.fn[op][dtype];
}

}  // namespace colltune::exec
