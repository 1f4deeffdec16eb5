// kiln.tune's core: the tuner of `kiln tune` in this process, its candidates scored on local
// threads or by a Python callable (kiln.tune's Dask scorer), and one candidate's score for a
// Dask worker.
#include "gym/tune.h"

#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include <map>
#include <memory>
#include <mutex>

#include "binding.h"

namespace kiln::python {
namespace {

// A benchmark in an environment of its own, made from a model's bytes.
struct TuneModel {
  TuneModel(const std::string& bytes, const std::string& uri, long planner_steps,
            const std::string& cc)
      : env(Options(planner_steps, cc)) {
    ir::Model m = LoadModelArg(py::bytes(bytes));
    py::gil_scoped_release nogil;
    gym::GymStatus st = env.MakeBenchmark(uri, std::move(m), &benchmark);
    if (!st.ok()) throw KilnError(st.message);
  }
  static gym::EnvironmentOptions Options(long planner_steps, const std::string& cc) {
    if (planner_steps < 1) throw KilnError("planner_steps must be at least 1");
    gym::EnvironmentOptions o;
    o.planner_steps = planner_steps;
    o.cc = cc;
    return o;
  }
  gym::Environment env;
  gym::BenchmarkModel benchmark;
};

// Scores through `score_batch(seqs, serial, done)`, which calls done(i, score) as candidate i
// finishes and returns every candidate's score in order: a number, or why it has none (a string).
// The space and the pipeline come from the local environment.
class CallableEvaluator : public gym::LocalEvaluator {
 public:
  CallableEvaluator(const TuneModel& m, py::function score_batch)
      : LocalEvaluator(m.env, m.benchmark, 1), score_batch_(std::move(score_batch)) {}

  std::vector<gym::TuneScore> Score(
      const std::vector<std::vector<int>>& seqs, bool serial,
      const std::function<void(const gym::TuneScore&)>& done) override {
    py::gil_scoped_acquire gil;
    std::vector<bool> reported(seqs.size());
    auto report = [&](size_t i, const py::handle& result) {
      if (i >= seqs.size() || reported[i]) return;
      reported[i] = true;
      if (done) done(ScoreOf(result));
    };
    py::cpp_function done_fn([&](size_t i, py::object result) { report(i, result); });
    py::list results = score_batch_(seqs, serial, done_fn);
    if (results.size() != seqs.size())
      throw KilnError("the scorer returned " + std::to_string(results.size()) + " scores for " +
                      std::to_string(seqs.size()) + " sequences");
    std::vector<gym::TuneScore> out;
    for (size_t i = 0; i < seqs.size(); ++i) {
      out.push_back(ScoreOf(results[i]));
      report(i, results[i]);
    }
    return out;
  }

 private:
  static gym::TuneScore ScoreOf(const py::handle& result) {
    if (py::isinstance<py::str>(result)) return {0, Error(result.cast<std::string>())};
    return {result.cast<double>(), OkStatus()};
  }

 private:
  py::function score_batch_;
};

// The result as a dict, with TuneResultToJson's fields (what `kiln tune --dask` reads back).
py::dict ResultDict(const gym::TuneResult& r) {
  return py::module_::import("json").attr("loads")(gym::TuneResultToJson(r));
}

py::dict Tune(const py::bytes& model, const std::string& uri, const std::string& objective,
              int budget, uint64_t seed, int max_length, long planner_steps, int jobs,
              const std::string& cc, std::optional<py::function> score_batch,
              std::optional<py::function> progress) {
  if (jobs < 1) throw KilnError("jobs must be at least 1");
  TuneModel m(model, uri, planner_steps, cc);
  gym::TuneOptions o;
  o.objective = objective;
  o.budget = budget;
  o.seed = seed;
  o.max_length = max_length;
  if (progress)
    o.progress = [&progress](int done, int total, double best) {
      py::gil_scoped_acquire gil;
      (*progress)(done, total, best);
    };
  std::unique_ptr<gym::LocalEvaluator> ev;
  if (score_batch)
    ev = std::make_unique<CallableEvaluator>(m, *score_batch);
  else
    ev = std::make_unique<gym::LocalEvaluator>(m.env, m.benchmark, jobs);
  Expected<gym::TuneResult> r = Error("not run");
  {
    py::gil_scoped_release nogil;
    r = gym::Tune(*ev, o);
  }
  return ResultDict(Check(std::move(r)));
}

// One worker's scorer: the model's environment, made once, then one candidate per call.
class TuneWorker {
 public:
  TuneWorker(const py::bytes& model, long planner_steps, const std::string& cc)
      : model_(model, "benchmark://tune/worker", planner_steps, cc) {}

  double Score(const std::vector<int>& actions, const std::string& objective) {
    const char* name = gym::TuneObservation(objective);
    if (!name) throw KilnError("objective must be arena, codesize or latency");
    const int space = model_.env.ObservationIndex(name);
    gym::TuneScore s;
    {
      py::gil_scoped_release nogil;
      s = gym::LocalEvaluator::ScoreOne(model_.env, model_.benchmark, actions, space);
    }
    Check(s.status);
    return s.value;
  }

 private:
  TuneModel model_;
};

}  // namespace

void BindTune(py::module_& m) {
  m.def("tune", &Tune, py::arg("model"), py::arg("uri"), py::arg("objective"), py::arg("budget"),
        py::arg("seed"), py::arg("max_length"), py::arg("planner_steps"), py::arg("jobs"),
        py::arg("cc"), py::arg("score_batch") = py::none(), py::arg("progress") = py::none());
  py::class_<TuneWorker>(m, "TuneWorker")
      .def(py::init<const py::bytes&, long, const std::string&>(), py::arg("model"),
           py::arg("planner_steps") = 2000, py::arg("cc") = "cc")
      .def("score", &TuneWorker::Score, py::arg("actions"), py::arg("objective"));
}

}  // namespace kiln::python
