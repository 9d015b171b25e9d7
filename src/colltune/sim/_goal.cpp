// A fast reader for GOAL files as colltune and LogGOPSim write them (colltune.sim.goal).
//
// parse(text, max_procs, max_value, max_tag) reads the statements of colltune.sim.goal's grammar
// without comments: `num_ranks N`, `rank R {` ... `}`, `[label:] send Nb to R [tag T] [cpu 0]
// [nic 0]`, `recv Nb from R ...` (R and T may be -1, wildcards), `calc N [cpu 0]` and `a requires
// b` / `a irequires b`, with any spaces or tabs between tokens.  It returns the ops in file order
// (kind, rank, peer, tag, value: bytes or calc units) and the dependencies (op, on, start: global
// indices in that order), or, at the first line it does not take, that line's number (0 if the
// file as a whole is wrong: no num_ranks, an unclosed block).  It takes no line that the Python
// reader would refuse, and refuses some it would take: the caller then reads the file with the
// Python reader, which gives the error (or the schedule).

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstdint>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace nb = nanobind;

namespace {

constexpr int8_t SEND = 0, RECV = 1, DELAY = 4;  // colltune.schedule.Kind

template <typename T>
nb::ndarray<nb::numpy, T, nb::ndim<1>> owned(std::vector<T>&& values) {
  auto* held = new std::vector<T>(std::move(values));
  nb::capsule free_it(held, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
  return nb::ndarray<nb::numpy, T, nb::ndim<1>>(held->data(), {held->size()}, free_it);
}

// One line's tokens, read left to right; every read fails (returns false) rather than throws.
class Line {
 public:
  explicit Line(std::string_view s) : s_(s) {}
  void skip_space() {
    while (p_ < s_.size() && (s_[p_] == ' ' || s_[p_] == '\t' || s_[p_] == '\r')) ++p_;
  }
  bool at_end() {  // only blanks are left (consumed if so)
    size_t q = p_;
    skip_space();
    if (p_ == s_.size()) return true;
    p_ = q;
    return false;
  }
  bool space() {  // at least one blank
    size_t q = p_;
    skip_space();
    return p_ > q;
  }
  bool word(std::string_view w) {
    if (s_.substr(p_, w.size()) != w) return false;
    p_ += w.size();
    return true;
  }
  bool peek(char c) const { return p_ < s_.size() && s_[p_] == c; }
  // An identifier [A-Za-z][A-Za-z0-9_]*.
  bool label(std::string_view& out) {
    size_t q = p_;
    if (p_ >= s_.size() || !is_alpha(s_[p_])) return false;
    while (p_ < s_.size() && (is_alpha(s_[p_]) || is_digit(s_[p_]) || s_[p_] == '_')) ++p_;
    out = s_.substr(q, p_ - q);
    return true;
  }
  // A number of at most `largest` (an optional minus sign when `negative`), of at most 18 digits.
  bool number(int64_t largest, bool negative, int64_t& out) {
    bool minus = negative && peek('-');
    if (minus) ++p_;
    size_t q = p_;
    int64_t v = 0;
    while (p_ < s_.size() && is_digit(s_[p_])) {
      if (p_ - q >= 18) return false;
      v = v * 10 + (s_[p_++] - '0');
    }
    if (p_ == q) return false;
    out = minus ? -v : v;
    return out <= largest;
  }
  // Trailing `cpu 0` / `nic 0` placements (only 0: colltune simulates one of each), then the end:
  // any number of both (a message's), or at most one cpu (a calc's).
  bool placements(bool message) {
    for (int count = 0;; ++count) {
      if (at_end()) return true;
      if (!message && count > 0) return false;
      if (!(word("cpu") || (message && word("nic"))) || !space()) return false;
      int64_t v;
      if (!number(0, false, v) || v != 0) return false;
      if (!at_end() && !space()) return false;
    }
  }

 private:
  static bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
  static bool is_digit(char c) { return c >= '0' && c <= '9'; }
  std::string_view s_;
  size_t p_ = 0;
};

nb::object parse(nb::bytes data, int64_t max_procs, int64_t max_value, int64_t max_tag) {
  std::string_view text(data.c_str(), data.size());
  std::vector<int8_t> kind;
  std::vector<int32_t> rank_of, peer, tag;
  std::vector<int64_t> value, dep_op, dep_on;
  std::vector<uint8_t> dep_start;
  std::vector<uint8_t> seen;
  std::unordered_map<std::string_view, int64_t> labels;  // in the open block: label -> global op
  int64_t procs = -1, rank = -1;
  int64_t number = 0;
  auto refuse = [&]() -> nb::object { return nb::int_(number); };
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string_view::npos) eol = text.size();
    Line line(text.substr(pos, eol - pos));
    pos = eol + 1;
    ++number;
    if (line.at_end()) continue;
    if (rank < 0) {  // between blocks
      int64_t v;
      if (line.word("num_ranks")) {
        if (procs >= 0 || !line.space() || !line.number(max_procs, false, v) || v < 1 || !line.at_end())
          return refuse();
        procs = v;
        seen.assign(size_t(procs), 0);
      } else if (line.word("rank")) {
        if (procs < 0 || !line.space() || !line.number(max_procs, false, v) || v >= procs || seen[size_t(v)])
          return refuse();
        line.skip_space();
        if (!line.word("{") || !line.at_end()) return refuse();
        rank = v;
        seen[size_t(v)] = 1;
        labels.clear();
      } else {
        return refuse();
      }
      continue;
    }
    if (line.word("}")) {
      if (!line.at_end()) return refuse();
      rank = -1;
      continue;
    }
    std::string_view a;
    bool labelled = false, blank = false;
    if (line.label(a)) {
      blank = line.space();
      if (line.peek(':')) {
        line.word(":");
        line.skip_space();
        labelled = true;
      } else if (!(a == "send" || a == "recv" || a == "calc")) {  // a dependency
        if (!blank) return refuse();
        bool start = line.word("irequires");
        if (!start && !line.word("requires")) return refuse();
        std::string_view b;
        if (!line.space() || !line.label(b) || !line.at_end()) return refuse();
        auto ia = labels.find(a), ib = labels.find(b);
        if (ia == labels.end() || ib == labels.end() || ib->second >= ia->second) return refuse();
        dep_op.push_back(ia->second);
        dep_on.push_back(ib->second);
        dep_start.push_back(start);
        continue;
      }
    }
    std::string_view op = a;
    if (labelled) {
      if (labels.count(a) || !line.label(op)) return refuse();
      blank = line.space();
    }
    if (!blank) return refuse();
    int64_t v, other = 0, t = 0;
    int8_t k;
    if (op == "calc") {
      if (!line.number(max_value, false, v)) return refuse();
      if (!line.at_end() && (!line.space() || !line.placements(false))) return refuse();
      k = DELAY;
      other = -1;
    } else if (op == "send" || op == "recv") {
      bool send = op == "send";
      if (!line.number(max_value, false, v)) return refuse();
      line.skip_space();
      if (!line.word("b") || !line.space() || !line.word(send ? "to" : "from") || !line.space() ||
          !line.number(max_procs, !send, other) || other < (send ? 0 : -1) || other >= procs || other == rank)
        return refuse();
      if (!line.at_end()) {
        if (!line.space()) return refuse();
        if (line.word("tag")) {
          if (!line.space() || !line.number(max_tag, !send, t) || t < (send ? 0 : -1)) return refuse();
          if (!line.at_end() && (!line.space() || !line.placements(true))) return refuse();
        } else if (!line.placements(true)) {
          return refuse();
        }
      }
      k = send ? SEND : RECV;
    } else {
      return refuse();
    }
    if (labelled) labels.emplace(a, int64_t(kind.size()));
    kind.push_back(k);
    rank_of.push_back(int32_t(rank));
    peer.push_back(int32_t(other));
    tag.push_back(int32_t(t));
    value.push_back(v);
  }
  if (procs < 0 || rank >= 0) {
    number = 0;
    return refuse();
  }
  nb::dict out;
  out["procs"] = procs;
  out["kind"] = owned(std::move(kind));
  out["rank"] = owned(std::move(rank_of));
  out["peer"] = owned(std::move(peer));
  out["tag"] = owned(std::move(tag));
  out["value"] = owned(std::move(value));
  out["dep_op"] = owned(std::move(dep_op));
  out["dep_on"] = owned(std::move(dep_on));
  out["dep_start"] = owned(std::move(dep_start));
  return out;
}

}  // namespace

NB_MODULE(_goal, m) {
  m.doc() = "colltune's fast GOAL reader (see colltune.sim.goal).";
  m.def("parse", &parse, nb::arg("data"), nb::arg("max_procs"), nb::arg("max_value"), nb::arg("max_tag"),
        "The ops and dependencies of GOAL text, or the number of the first line it does not take.");
}
