// halide_build.cpp: the pipelines' definitions and schedules, and every call
// into libHalide.  The one translation unit of the example that includes
// Halide.h (see halide_build.h).
#include "halide_build.h"

#include <Halide.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

using namespace Halide;

namespace {

std::mutex halide_mutex; // see halide_build.h: one call into libHalide at a time

struct Built {
  Pipeline pipeline;
  std::vector<Argument> args;
};

// The innermost output dimension vectorised, the rows parallel, as asked.
void schedule_rows(Func out, Var inner, Var row, const hj_schedule &s, TailStrategy tail) {
  if (s.vector > 1) out.vectorize(inner, (int)s.vector, tail);
  if (s.parallel) out.parallel(row);
}

// x [576, T], w [576] -> out [576, T]: x / sqrt(mean(x^2) + eps) * w.
Built rmsnorm(const hj_schedule &s) {
  ImageParam x(Float(32), 2, "x"), w(Float(32), 1, "w");
  Var h("h"), t("t");
  RDom r(0, HJ_HIDDEN, "r");
  Func sumsq("sumsq");
  sumsq(t) = 0.0f;
  sumsq(t) += x(r, t) * x(r, t);
  Func out("rmsnorm");
  Expr inv = 1.0f / sqrt(sumsq(t) / (float)HJ_HIDDEN + (float)HJ_RMS_EPS);
  out(h, t) = x(h, t) * inv * w(h);
  x.dim(0).set_bounds(0, HJ_HIDDEN);
  w.dim(0).set_bounds(0, HJ_HIDDEN);
  out.output_buffer().dim(0).set_bounds(0, HJ_HIDDEN);
  out.bound(h, 0, HJ_HIDDEN);
  sumsq.compute_at(out, t);
  schedule_rows(out, h, t, s, TailStrategy::Auto);
  return {Pipeline(out), {x, w}};
}

// gate, up [1536, T] -> out [1536, T]: silu(gate) * up.
Built silu_gate(const hj_schedule &s) {
  ImageParam gate(Float(32), 2, "gate"), up(Float(32), 2, "up");
  Var i("i"), t("t");
  Func out("silu_gate");
  out(i, t) = gate(i, t) / (1.0f + exp(-gate(i, t))) * up(i, t);
  gate.dim(0).set_bounds(0, HJ_INTERMEDIATE);
  up.dim(0).set_bounds(0, HJ_INTERMEDIATE);
  out.output_buffer().dim(0).set_bounds(0, HJ_INTERMEDIATE);
  out.bound(i, 0, HJ_INTERMEDIATE);
  schedule_rows(out, i, t, s, TailStrategy::Auto);
  return {Pipeline(out), {gate, up}};
}

// x [64, heads, T], inv_freq [32], pos0 -> out [64, heads, T]: rotate-half
// RoPE of token t at position pos0 + t.
Built rope(const hj_schedule &s, int heads, const char *name) {
  const int half = HJ_HEAD_DIM / 2;
  ImageParam x(Float(32), 3, "x"), inv_freq(Float(32), 1, "inv_freq");
  Param<int32_t> pos0("pos0");
  Var d("d"), hd("head"), t("t"), j("j");
  Func angle("angle"), cos_t("cos_t"), sin_t("sin_t");
  angle(j, t) = cast<float>(pos0 + t) * inv_freq(j);
  cos_t(j, t) = cos(angle(j, t));
  sin_t(j, t) = sin(angle(j, t));
  Expr jj = d % half; // (bounds inference keeps it in [0, 32), unlike a select)
  Expr partner =
      select(d < half, -x(min(d + half, HJ_HEAD_DIM - 1), hd, t), x(max(d - half, 0), hd, t));
  Func out(name);
  out(d, hd, t) = x(d, hd, t) * cos_t(jj, t) + partner * sin_t(jj, t);
  x.dim(0).set_bounds(0, HJ_HEAD_DIM);
  x.dim(1).set_bounds(0, heads);
  inv_freq.dim(0).set_bounds(0, half);
  out.output_buffer().dim(0).set_bounds(0, HJ_HEAD_DIM);
  out.output_buffer().dim(1).set_bounds(0, heads);
  out.bound(d, 0, HJ_HEAD_DIM).bound(hd, 0, heads);
  cos_t.compute_at(out, t);
  sin_t.compute_at(out, t);
  schedule_rows(out, d, t, s, TailStrategy::Auto);
  return {Pipeline(out), {x, inv_freq, pos0}};
}

// scores [kv, q, 9] -> out [kv, q, 9]: causal softmax of scores / 8; query
// t sits at position kv - q + t and sees keys 0 .. that position.
Built softmax(const hj_schedule &s) {
  ImageParam scores(Float(32), 3, "scores");
  Var j("j"), t("t"), hd("head");
  Expr kv = scores.dim(0).extent(), q = scores.dim(1).extent();
  Expr visible = j <= kv - q + t;
  const float scale = 1.0f / 8.0f; // 1 / sqrt(head_dim 64), exact in float
  Func masked("masked"), e("e"), rowmax("rowmax"), rowsum("rowsum"), out("softmax");
  // Finite stand-in for -inf: Halide compiles with LLVM's fast-math flags
  // (no infinities), so a masked score is the lowest float and its
  // exponential is a select to 0.
  masked(j, t, hd) = select(visible, scores(j, t, hd) * scale, Float(32).min());
  RDom r(0, kv, "r");
  rowmax(t, hd) = Float(32).min();
  rowmax(t, hd) = max(rowmax(t, hd), masked(r, t, hd));
  e(j, t, hd) = select(visible, exp(masked(j, t, hd) - rowmax(t, hd)), 0.0f);
  rowsum(t, hd) = 0.0f;
  rowsum(t, hd) += e(r, t, hd);
  out(j, t, hd) = e(j, t, hd) / rowsum(t, hd);
  scores.dim(2).set_bounds(0, HJ_HEADS);
  out.output_buffer().dim(2).set_bounds(0, HJ_HEADS);
  rowmax.compute_at(out, t);
  rowsum.compute_at(out, t);
  e.compute_at(out, t);
  // The rows' length is the context (any kv >= 1): vectorise with a guard.
  schedule_rows(out, j, hd, s, TailStrategy::GuardWithIf);
  return {Pipeline(out), {scores}};
}

Built build(const hj_spec &s) {
  switch (s.kind) {
    case HJ_RMSNORM:
      return rmsnorm(s.sched);
    case HJ_SILU_GATE:
      return silu_gate(s.sched);
    case HJ_ROPE_Q:
      return rope(s.sched, HJ_HEADS, "rope_q");
    case HJ_ROPE_K:
      return rope(s.sched, HJ_KV_HEADS, "rope_k");
    case HJ_SOFTMAX:
      return softmax(s.sched);
    default:
      break;
  }
  throw std::runtime_error("unknown pipeline kind");
}

// Halide's messages run over several lines: the first non-empty one.
void first_line(const char *what, char *err, size_t errlen) {
  std::string m(what ? what : "");
  size_t start = m.find_first_not_of("\n ");
  m = start == std::string::npos ? std::string("unknown error") : m.substr(start);
  m = m.substr(0, m.find('\n'));
  std::snprintf(err, errlen, "Halide: %s", m.c_str());
}

int copy_out(const std::string &s, char *buf, size_t n) {
  if (s.size() + 1 > n) return -1;
  std::memcpy(buf, s.c_str(), s.size() + 1);
  return 0;
}

// Runs f under the mutex; Halide's exceptions become -1 and one line.
template <typename F>
int guarded(char *err, size_t errlen, F f) {
  std::lock_guard<std::mutex> lock(halide_mutex);
  try {
    return f();
  } catch (const Halide::Error &e) {
    first_line(e.what(), err, errlen);
  } catch (const std::exception &e) {
    first_line(e.what(), err, errlen);
  }
  return -1;
}

Target parse_target(const char *target) {
  if (!Target::validate_target_string(target))
    throw std::runtime_error(std::string("not a Halide target: ") + target);
  return Target(target);
}

} // namespace

extern "C" int hj_halide_pipeline_target(char *buf, size_t n) {
  char err[8];
  return guarded(err, sizeof err, [&] {
    return copy_out(get_host_target().with_feature(Target::NoRuntime).to_string(), buf, n);
  });
}

extern "C" int hj_halide_runtime_target(char *buf, size_t n) {
  char err[8];
  return guarded(err, sizeof err, [&] {
    Target host = get_host_target();
    return copy_out(Target(host.os, host.arch, host.bits).to_string(), buf, n);
  });
}

extern "C" int hj_halide_llvm_version(void) { return Internal::get_llvm_version(); }

extern "C" int hj_halide_compile(const hj_spec *s, const char *target, const char *fn_name,
                                 const char *obj_path, double *ms, char *err, size_t errlen) {
  return guarded(err, errlen, [&] {
    auto t0 = std::chrono::steady_clock::now();
    Built b = build(*s);
    b.pipeline.compile_to_object(obj_path, b.args, fn_name, parse_target(target));
    if (ms)
      *ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    return 0;
  });
}

extern "C" int hj_halide_lowered(const hj_spec *s, const char *target, int normalize, char **text,
                                 char *err, size_t errlen) {
  return guarded(err, errlen, [&] {
    Built b = build(*s);
    Module m = b.pipeline.compile_to_module(b.args, "hj_pipeline", parse_target(target));
    std::ostringstream os;
    for (const auto &f : m.functions()) os << f.body << "\n";
    std::string outs = os.str();
    if (normalize) {
      // A second build of a Func named "sumsq" in this process is
      // "sumsq$1": drop the suffix (the builder's own names are distinct
      // within a pipeline), and the counter in the names of the closures of
      // parallel loops ("..._par_for_rmsnorm__3_s0_t"); number the
      // temporaries ("t13") in order of appearance.
      static const std::regex suffix("\\$[0-9]+"), closure("__[0-9]+_"), temp("\\bt[0-9]+\\b");
      std::string in = std::regex_replace(std::regex_replace(outs, suffix, ""), closure, "__#_");
      std::vector<std::string> seen;
      outs.clear();
      auto last = in.cbegin();
      for (std::sregex_iterator it(in.begin(), in.end(), temp), end; it != end; ++it) {
        std::string name = it->str();
        size_t k = 0;
        while (k < seen.size() && seen[k] != name) k++;
        if (k == seen.size()) seen.push_back(name);
        outs.append(last, in.cbegin() + it->position());
        outs += "t#" + std::to_string(k);
        last = in.cbegin() + it->position() + it->length();
      }
      outs.append(last, in.cend());
    }
    *text = static_cast<char *>(std::malloc(outs.size() + 1));
    if (!*text) throw std::runtime_error("out of memory");
    std::memcpy(*text, outs.c_str(), outs.size() + 1);
    return 0;
  });
}

extern "C" int hj_halide_jit(const hj_spec *s, char *err, size_t errlen) {
  return guarded(err, errlen, [&] {
    Built b = build(*s);
    b.pipeline.compile_jit(get_host_target());
    return 0;
  });
}

extern "C" int hj_halide_emit_runtime(const char *target, const char *obj_path, char *err,
                                      size_t errlen) {
  return guarded(err, errlen, [&] {
    compile_standalone_runtime(obj_path, parse_target(target));
    return 0;
  });
}
