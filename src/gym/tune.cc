#include "gym/tune.h"

#include <algorithm>
#include <atomic>
#include <limits>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "passes/pipeline.h"

namespace kiln::gym {
namespace {

using Sequence = std::vector<int>;

// Alternating timings of the default and the best sequence behind a measured objective's decision.
constexpr int kConfirmRounds = 7;

int IndexOf(const std::vector<std::string>& names, const std::string& name) {
  auto it = std::find(names.begin(), names.end(), name);
  return it == names.end() ? -1 : static_cast<int>(it - names.begin());
}

// Runs `score(worker, i)` for every i < n on `workers` threads, done() after each, serialized.
std::vector<TuneScore> ScoreOnWorkers(size_t n, size_t workers,
                                      const std::function<TuneScore(size_t, size_t)>& score,
                                      const std::function<void(const TuneScore&)>& done) {
  std::vector<TuneScore> out(n);
  std::atomic<size_t> next{0};
  std::mutex mu;
  auto work = [&](size_t worker) {
    for (size_t i; (i = next++) < n;) {
      out[i] = score(worker, i);
      std::lock_guard<std::mutex> lock(mu);
      if (done) done(out[i]);
    }
  };
  std::vector<std::thread> threads;
  for (size_t w = 0; w < std::max<size_t>(1, std::min(workers, n)); ++w)
    threads.emplace_back(work, w);
  for (auto& t : threads) t.join();
  return out;
}

// Counts evaluations and reports progress over an evaluator.
class Search {
 public:
  Search(TuneEvaluator& ev, const TuneOptions& o) : ev_(ev), o_(o) {}

  std::vector<TuneScore> Evaluate(const std::vector<Sequence>& seqs, bool serial = false) {
    return ev_.Score(seqs, serial, [&](const TuneScore& s) {
      ++done_;
      if (s.status.ok()) best_ = std::min(best_, s.value);
      if (o_.progress) o_.progress(done_, o_.budget, best_);
    });
  }
  int done() const { return done_; }

 private:
  TuneEvaluator& ev_;
  TuneOptions o_;
  int done_ = 0;
  double best_ = std::numeric_limits<double>::infinity();
};

}  // namespace

ClientEvaluator::ClientEvaluator(std::vector<GymClient*> clients, std::string benchmark)
    : clients_(std::move(clients)), benchmark_(std::move(benchmark)) {}

Expected<TuneSpace> ClientEvaluator::Space(const std::string& observation) {
  if (clients_.empty()) return Error("tune needs at least one service");
  KILN_ASSIGN_OR_RETURN(spaces_, clients_[0]->GetSpaces());
  observation_ = spaces_.Observation(observation);
  if (observation_ < 0) return Error("the service has no " + observation + " observation");
  return TuneSpace{spaces_.actions, spaces_.observations[observation_].deterministic()};
}

std::vector<TuneScore> ClientEvaluator::Score(const std::vector<Sequence>& seqs, bool serial,
                                              const std::function<void(const TuneScore&)>& done) {
  auto score = [&](size_t worker, size_t i) -> TuneScore {
    GymClient* c = clients_[worker];
    auto s = c->StartSession(benchmark_);
    if (!s.ok()) return {0, s.status()};
    auto step = c->Step(*s, seqs[i], {observation_});
    Status end = c->EndSession(*s);
    if (!step.ok()) return {0, step.status()};
    if (!end.ok()) return {0, end};
    auto v = ObservationNumber(step->observations[0]);
    if (!v.ok()) return {0, v.status()};
    return {*v, OkStatus()};
  };
  return ScoreOnWorkers(seqs.size(), serial ? 1 : clients_.size(), score, done);
}

Expected<std::string> ClientEvaluator::Pipeline(const Sequence& seq) {
  int p = spaces_.Observation("Pipeline");
  if (p < 0) return Error("the service has no Pipeline observation");
  GymClient* c = clients_[0];
  KILN_ASSIGN_OR_RETURN(int64_t s, c->StartSession(benchmark_));
  auto r = c->Step(s, seq, {p});
  (void)c->EndSession(s);
  if (!r.ok()) return r.status();
  return r->observations[0].string_value();
}

LocalEvaluator::LocalEvaluator(const Environment& env, const BenchmarkModel& benchmark, int jobs)
    : env_(env), benchmark_(benchmark), jobs_(std::max(1, jobs)) {}

Expected<TuneSpace> LocalEvaluator::Space(const std::string& observation) {
  observation_ = env_.ObservationIndex(observation);
  if (observation_ < 0) return Error("the environment has no " + observation + " observation");
  return TuneSpace{env_.actions(), env_.observation_spaces()[observation_].deterministic};
}

TuneScore LocalEvaluator::ScoreOne(const Environment& env, const BenchmarkModel& benchmark,
                                   const Sequence& seq, int space) {
  Session session(env, benchmark);
  StepResult step;
  GymStatus st = session.Step(seq, &step);
  ObservationValue v;
  if (st.ok()) st = session.Observe(space, &v);
  if (!st.ok()) return {0, Error(st.message)};
  switch (v.kind) {
    case ObservationValue::Kind::kScalarInt64:
      return {static_cast<double>(v.scalar_int), OkStatus()};
    case ObservationValue::Kind::kScalarDouble:
      return {v.scalar_double, OkStatus()};
    default:
      return {0, Error("observation " + env.observation_spaces()[space].name + " is not a number")};
  }
}

std::vector<TuneScore> LocalEvaluator::Score(const std::vector<Sequence>& seqs, bool serial,
                                             const std::function<void(const TuneScore&)>& done) {
  auto score = [&](size_t, size_t i) { return ScoreOne(env_, benchmark_, seqs[i], observation_); };
  return ScoreOnWorkers(seqs.size(), serial ? 1 : static_cast<size_t>(jobs_), score, done);
}

Expected<std::string> LocalEvaluator::Pipeline(const Sequence& seq) {
  Session session(env_, benchmark_);
  StepResult step;
  GymStatus st = session.Step(seq, &step);
  if (!st.ok()) return Error(st.message);
  return passes::PipelineToJson(session.pipeline());
}

std::string TuneResultToJson(const TuneResult& r) {
  nlohmann::json j;
  j["observation"] = r.observation;
  j["margin"] = r.margin;
  j["baseline"] = r.baseline;
  j["best"] = r.best;
  j["improved"] = r.improved;
  j["best_actions"] = r.best_actions;
  j["pipeline"] = r.pipeline_json;
  j["evaluations"] = r.evaluations;
  j["confirm_rounds"] = r.confirm_rounds;
  return j.dump();
}

Expected<TuneResult> TuneResultFromJson(const std::string& json) {
  auto j = nlohmann::json::parse(json, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Error("a tune result is not a JSON object");
  try {
    TuneResult r;
    r.observation = j.at("observation").get<std::string>();
    r.margin = j.at("margin").get<double>();
    r.baseline = j.at("baseline").get<double>();
    r.best = j.at("best").get<double>();
    r.improved = j.at("improved").get<bool>();
    r.best_actions = j.at("best_actions").get<std::vector<std::string>>();
    r.pipeline_json = j.at("pipeline").get<std::string>();
    r.evaluations = j.at("evaluations").get<int>();
    r.confirm_rounds = j.at("confirm_rounds").get<int>();
    return r;
  } catch (const nlohmann::json::exception& e) {
    return Error(std::string("a tune result lacks a field or has the wrong type: ") + e.what());
  }
}

std::vector<std::string> DefaultPipelineActions() {
  std::vector<std::string> actions = passes::DefaultPipeline().passes;
  actions.push_back("planner:default");
  actions.push_back("schedule:min-peak");
  return actions;
}

const char* TuneObservation(const std::string& objective) {
  return objective == "arena"      ? "ArenaBytes"
         : objective == "codesize" ? "CodeSizeBytes"
         : objective == "latency"  ? "Runtime"
                                   : nullptr;
}

Expected<TuneResult> Tune(const std::vector<GymClient*>& clients, const std::string& benchmark,
                          const TuneOptions& o) {
  ClientEvaluator ev(clients, benchmark);
  return Tune(ev, o);
}

Expected<TuneResult> Tune(TuneEvaluator& ev, const TuneOptions& o) {
  if (o.budget < 2) return Error("--budget must be at least 2");
  const char* name = TuneObservation(o.objective);
  if (!name) return Error("--objective must be arena, codesize or latency");
  KILN_ASSIGN_OR_RETURN(TuneSpace spaces, ev.Space(name));
  // Noisy objectives need a clear win; exact ones any win.
  const double margin = spaces.deterministic ? 0.0 : 0.03;

  Sequence baseline;
  for (const auto& p : DefaultPipelineActions()) {
    int a = IndexOf(spaces.actions, p);
    if (a < 0) return Error("the service has no action '" + p + "' of the default pipeline");
    baseline.push_back(a);
  }
  Search search(ev, o);
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
    Search serial(ev, TuneOptions{});
    for (int k = 0; k < kConfirmRounds; ++k) {
      auto x = serial.Evaluate({baseline}, true);
      auto y = serial.Evaluate({best}, true);
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
  KILN_ASSIGN_OR_RETURN(r.pipeline_json, ev.Pipeline(best));
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
