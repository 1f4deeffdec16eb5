#include "gym/tune.h"

#include <algorithm>
#include <atomic>
#include <limits>
#include <mutex>
#include <random>
#include <thread>

#include "passes/pipeline.h"

namespace kiln::gym {
namespace {

using Sequence = std::vector<int>;

// Alternating timings of the default and the best sequence behind a measured objective's decision.
constexpr int kConfirmRounds = 7;

struct Scored {
  double value = std::numeric_limits<double>::infinity();
  Status status;
};

class Search {
 public:
  Search(const std::vector<GymClient*>& clients, const std::string& benchmark, const TuneOptions& o,
         const Spaces& spaces, int observation)
      : clients_(clients),
        benchmark_(benchmark),
        o_(o),
        spaces_(spaces),
        observation_(observation) {}

  // Scores every sequence (in parallel, one worker per client); stops early when the budget is
  // spent.
  std::vector<Scored> Evaluate(const std::vector<Sequence>& seqs) {
    std::vector<Scored> out(seqs.size());
    std::atomic<size_t> next{0};
    auto work = [&](GymClient* c) {
      for (size_t i; (i = next++) < seqs.size();) {
        out[i] = Score(c, seqs[i]);
        std::lock_guard<std::mutex> lock(mu_);
        ++done_;
        if (out[i].status.ok()) best_ = std::min(best_, out[i].value);
        if (o_.progress) o_.progress(done_, o_.budget, best_);
      }
    };
    std::vector<std::thread> threads;
    for (GymClient* c : clients_) threads.emplace_back(work, c);
    for (auto& t : threads) t.join();
    return out;
  }

  Expected<std::string> PipelineOf(const Sequence& seq) {
    int p = spaces_.Observation("Pipeline");
    if (p < 0) return Error("the service has no Pipeline observation");
    GymClient* c = clients_[0];
    KILN_ASSIGN_OR_RETURN(int64_t s, c->StartSession(benchmark_));
    auto r = c->Step(s, seq, {p});
    (void)c->EndSession(s);
    if (!r.ok()) return r.status();
    return r->observations[0].string_value();
  }

  int done() const { return done_; }

 private:
  Scored Score(GymClient* c, const Sequence& seq) {
    Scored r;
    auto s = c->StartSession(benchmark_);
    if (!s.ok()) return {r.value, s.status()};
    auto step = c->Step(*s, seq, {observation_});
    Status end = c->EndSession(*s);
    if (!step.ok()) return {r.value, step.status()};
    if (!end.ok()) return {r.value, end};
    auto v = ObservationNumber(step->observations[0]);
    if (!v.ok()) return {r.value, v.status()};
    r.value = *v;
    return r;
  }

  std::vector<GymClient*> clients_;
  std::string benchmark_;
  TuneOptions o_;
  const Spaces& spaces_;
  int observation_;
  std::mutex mu_;
  int done_ = 0;
  double best_ = std::numeric_limits<double>::infinity();
};

}  // namespace

Expected<TuneResult> Tune(const std::vector<GymClient*>& clients, const std::string& benchmark,
                          const TuneOptions& o) {
  if (clients.empty()) return Error("tune needs at least one service");
  if (o.budget < 2) return Error("--budget must be at least 2");
  const char* name = o.objective == "arena"      ? "ArenaBytes"
                     : o.objective == "codesize" ? "CodeSizeBytes"
                     : o.objective == "latency"  ? "Runtime"
                                                 : nullptr;
  if (!name) return Error("--objective must be arena, codesize or latency");
  KILN_ASSIGN_OR_RETURN(Spaces spaces, clients[0]->GetSpaces());
  int obs = spaces.Observation(name);
  if (obs < 0) return Error(std::string("the service has no ") + name + " observation");
  // Noisy objectives need a clear win; exact ones any win.
  const double margin = spaces.observations[obs].deterministic() ? 0.0 : 0.03;

  Sequence baseline;
  for (const auto& p : passes::DefaultPipeline().passes) {
    int a = spaces.Action(p);
    if (a < 0) return Error("the service has no action '" + p + "' of the default pipeline");
    baseline.push_back(a);
  }
  for (const char* extra : {"planner:default", "schedule:min-peak"}) {
    int a = spaces.Action(extra);
    if (a >= 0) baseline.push_back(a);
  }
  Search search(clients, benchmark, o, spaces, obs);
  auto base = search.Evaluate({baseline});
  if (!base[0].status.ok()) return base[0].status;

  const int num_actions = static_cast<int>(spaces.actions.size());
  const int max_length = o.max_length > 0 ? o.max_length : num_actions;
  Sequence best = baseline;
  double best_value = base[0].value;
  auto better = [&](double v, double than) { return v < than * (1.0 - margin); };

  // Random phase: half the budget. Candidate i depends only on (seed, i).
  std::vector<Sequence> randoms;
  const int num_random = (o.budget - 1) / 2;
  for (int i = 0; i < num_random; ++i) {
    std::mt19937_64 rng(o.seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(i));
    Sequence s = (i % 2) ? baseline : Sequence{};
    int len = 1 + static_cast<int>(rng() % static_cast<uint64_t>(max_length));
    for (int k = 0; k < len; ++k)
      s.push_back(static_cast<int>(rng() % static_cast<uint64_t>(num_actions)));
    randoms.push_back(std::move(s));
  }
  auto scores = search.Evaluate(randoms);
  for (size_t i = 0; i < scores.size(); ++i) {
    if (!scores[i].status.ok()) return scores[i].status;
    if (better(scores[i].value, best_value)) {
      best_value = scores[i].value;
      best = randoms[i];
    }
  }

  // Greedy phase: extend the best sequence by the action that helps most, while budget lasts.
  while (search.done() + num_actions <= o.budget) {
    std::vector<Sequence> cands;
    for (int a = 0; a < num_actions; ++a) {
      Sequence s = best;
      s.push_back(a);
      cands.push_back(std::move(s));
    }
    auto sc = search.Evaluate(cands);
    int pick = -1;
    for (size_t i = 0; i < sc.size(); ++i) {
      if (!sc[i].status.ok()) return sc[i].status;
      if (pick < 0 || sc[i].value < sc[pick].value) pick = static_cast<int>(i);
    }
    if (pick < 0 || !better(sc[pick].value, best_value)) break;
    best_value = sc[pick].value;
    best = cands[pick];
  }

  // Pruning, while budget lasts: drop every action whose removal does not make it worse.
  for (int i = static_cast<int>(best.size()) - 1;
       best != baseline && i >= 0 && search.done() < o.budget; --i) {
    Sequence s = best;
    s.erase(s.begin() + i);
    auto sc = search.Evaluate({s});
    if (!sc[0].status.ok()) return sc[0].status;
    if (sc[0].value <= best_value * (1.0 + margin)) {
      best = std::move(s);
      if (margin == 0) best_value = sc[0].value;
    }
  }

  TuneResult r;
  r.observation = name;
  r.margin = margin;
  r.baseline = base[0].value;
  r.best = best_value;
  if (margin > 0 && best != baseline) {
    // A measured objective: the decision rests on baseline and best timed again, alternately on one
    // worker (so drift hits both alike), compared by their medians.
    std::vector<double> a, b;
    Search serial({clients[0]}, benchmark, TuneOptions{}, spaces, obs);
    for (int k = 0; k < kConfirmRounds; ++k) {
      auto x = serial.Evaluate({baseline});
      auto y = serial.Evaluate({best});
      if (!x[0].status.ok()) return x[0].status;
      if (!y[0].status.ok()) return y[0].status;
      a.push_back(x[0].value);
      b.push_back(y[0].value);
    }
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    r.baseline = a[kConfirmRounds / 2];
    r.best = b[kConfirmRounds / 2];
    r.confirm_rounds = kConfirmRounds;
  }
  // Never a result worse than the default, nor one that only ties it: then the default stands.
  r.improved = best != baseline && better(r.best, r.baseline);
  if (!r.improved) {
    best = baseline;
    r.best = r.baseline;
  }
  for (int a : best) r.best_actions.push_back(spaces.actions[a]);
  KILN_ASSIGN_OR_RETURN(r.pipeline_json, search.PipelineOf(best));
  if (!r.improved) {
    // The session's pipeline lists only the passes that changed this model; the default is kept
    // whole (with the session's fixed shapes), as a user would run it.
    KILN_ASSIGN_OR_RETURN(passes::Pipeline p,
                          passes::ParsePipeline(r.pipeline_json, "the service's Pipeline"));
    const passes::Pipeline d = passes::DefaultPipeline();
    p.passes = d.passes;
    p.planner = d.planner;
    p.reorder = d.reorder;
    r.pipeline_json = passes::PipelineToJson(p);
  }
  r.evaluations = search.done();
  return r;
}

}  // namespace kiln::gym
