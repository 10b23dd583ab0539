//===- Schedule.cpp - Live schedule and static race check -----------------===//
//
// Part of offload. LiveSchedule lists, per instruction, which buffers the
// executor allocates and frees.
// checkPlanRaces proves, with vector clocks over the three streams, that
// every cross-stream hazard is ordered by stream order or events.
//
//===----------------------------------------------------------------------===//

#include "Executor.h"

#include <algorithm>

using namespace offload::rt;

LiveSchedule LiveSchedule::build(const PlanData &d) {
  LiveSchedule s;
  size_t n = std::max<size_t>(d.instructions.size(), 1);
  s.allocAt.resize(n);
  s.freeAfter.resize(n);
  for (size_t b = 0; b < d.buffers.size(); ++b) {
    s.allocAt[size_t(d.buffers[b].liveFirst)].push_back(int(b));
    s.freeAfter[size_t(d.buffers[b].liveLast)].push_back(int(b));
  }
  return s;
}

namespace {
using Clock = std::array<int, NumStreams>;

struct RaceChecker {
  const PlanData &d;
  std::vector<Clock> vc;
  std::vector<int> seq;

  explicit RaceChecker(const PlanData &d) : d(d) {
    size_t n = d.instructions.size();
    vc.resize(n);
    seq.resize(n);
    std::array<Clock, NumStreams> lane{};
    std::array<int, NumStreams> count{};
    std::vector<int> recorder(size_t(d.numEvents), -1);
    for (size_t i = 0; i < n; ++i) {
      const InstructionDesc &in = d.instructions[i];
      int s = in.stream;
      // Stream order: this stream's previous instruction; events join the
      // recorder's clock.
      Clock v = lane[size_t(s)];
      for (int e : in.waitEvents) {
        int r = recorder[size_t(e)];
        for (int t = 0; t < NumStreams; ++t)
          v[size_t(t)] = std::max(v[size_t(t)], vc[size_t(r)][size_t(t)]);
      }
      seq[i] = ++count[size_t(s)];
      v[size_t(s)] = seq[i];
      vc[i] = v;
      lane[size_t(s)] = v;
      if (in.recordEvent >= 0)
        recorder[size_t(in.recordEvent)] = int(i);
    }
  }

  /// Does instruction a complete before instruction b starts?
  bool hb(int a, int b) const {
    if (a == b)
      return true;
    if (a > b)
      return false;
    int sa = d.instructions[size_t(a)].stream;
    return vc[size_t(b)][size_t(sa)] >= seq[size_t(a)];
  }

  std::string name(int i) const {
    return "instruction " + std::to_string(i) + " (" +
           d.instructions[size_t(i)].op + ", " +
           streamName(d.instructions[size_t(i)].stream) + " stream)";
  }
  std::string buf(int b) const {
    return "buffer " + std::to_string(b) + " '" + d.buffers[size_t(b)].name +
           "'";
  }
};
} // namespace

Status offload::rt::checkPlanRaces(const PlanData &d) {
  RaceChecker rc(d);
  size_t nb = d.buffers.size();
  auto base = [&](int b) {
    return d.buffers[size_t(b)].aliasOf >= 0 ? d.buffers[size_t(b)].aliasOf : b;
  };
  std::vector<int> lastWriter(nb, -1), firstUser(nb, -1);
  std::vector<std::array<int, NumStreams>> lastReader(nb, {-1, -1, -1, -1});
  std::vector<std::array<int, NumStreams>> lastUser(nb, {-1, -1, -1, -1});
  auto err = [](std::string m) {
    return Status::error("missing wait: " + std::move(m));
  };
  for (int i = 0; i < int(d.instructions.size()); ++i) {
    const InstructionDesc &in = d.instructions[size_t(i)];
    int s = in.stream;
    for (int b : in.inputs) {
      if (b < 0)
        continue;
      int m = base(b);
      int w = lastWriter[size_t(m)];
      if (w >= 0 && !rc.hb(w, i))
        return err(rc.name(i) + " reads " + rc.buf(b) + " written by " +
                   rc.name(w) + " with no event ordering them");
    }
    for (int b : in.outputs) {
      int m = base(b);
      int w = lastWriter[size_t(m)];
      if (w >= 0 && !rc.hb(w, i))
        return err(rc.name(i) + " writes " + rc.buf(b) + " also written by " +
                   rc.name(w) + " with no event ordering them");
      for (int r : lastReader[size_t(m)])
        if (r >= 0 && !rc.hb(r, i))
          return err(rc.name(i) + " overwrites " + rc.buf(b) +
                     " still read by " + rc.name(r) +
                     " with no event ordering them");
    }
    auto use = [&](int b) {
      int m = base(b);
      if (firstUser[size_t(m)] < 0)
        firstUser[size_t(m)] = i;
      lastUser[size_t(m)][size_t(s)] = i;
    };
    for (int b : in.inputs)
      if (b >= 0) {
        lastReader[size_t(base(b))][size_t(s)] = i;
        use(b);
      }
    for (int b : in.outputs) {
      lastWriter[size_t(base(b))] = i;
      lastReader[size_t(base(b))] = {-1, -1, -1, -1};
      use(b);
    }
  }
  // Arena reuse: every use of an earlier occupant of the bytes must complete
  // before the first use of the later one.
  for (size_t a = 0; a < nb; ++a) {
    const BufferDesc &A = d.buffers[a];
    if (A.aliasOf >= 0 || A.size == 0)
      continue;
    for (size_t b = 0; b < nb; ++b) {
      const BufferDesc &B = d.buffers[b];
      if (b == a || B.aliasOf >= 0 || B.space != A.space || B.size == 0 ||
          A.liveLast >= B.liveFirst)
        continue;
      if (B.offset >= A.offset + A.size || A.offset >= B.offset + B.size)
        continue;
      int f = firstUser[b];
      if (f < 0)
        continue;
      for (int u : lastUser[a])
        if (u >= 0 && !rc.hb(u, f))
          return err(rc.name(f) + " is the first use of " + rc.buf(int(b)) +
                     ", whose bytes " + rc.buf(int(a)) + " used until " +
                     rc.name(u) + ", with no event ordering them");
    }
  }
  return Status::success();
}
