#include "quantize/calibration.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>

#include "bundle/bundle.h"
#include "frontend/model_loader.h"

namespace kiln::quantize {
namespace {

namespace fs = std::filesystem;

bool IsTensorFile(const fs::path& p) { return p.extension() == ".npy" || p.extension() == ".pb"; }

// The entries of `dir` that pass `keep`, in name order.
template <typename Keep>
Expected<std::vector<fs::path>> SortedEntries(const fs::path& dir, Keep keep) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (keep(*it)) out.push_back(it->path());
  if (ec) return Error(dir.string() + ": " + ec.message());
  std::sort(out.begin(), out.end());
  return out;
}

Status CheckSampleTensor(const Tensor& t, const ir::Value& v, const std::string& label) {
  if (t.kind() != Tensor::Kind::kTensor) return Error(label + ": not a tensor");
  if (v.type.dtype != DType::kUndefined && t.dtype() != v.type.dtype) {
    return Error(label + ": element type " + std::string(DTypeName(t.dtype())) + ", but input '" +
                 v.name + "' is " + std::string(DTypeName(v.type.dtype)));
  }
  if (!v.type.has_shape) return OkStatus();
  bool fits = t.rank() == static_cast<int>(v.type.dims.size());
  for (int i = 0; fits && i < t.rank(); ++i)
    fits = v.type.dims[i] < 0 || v.type.dims[i] == t.dim(i);
  if (!fits) {
    return Error(label + ": dims " + DimsToString(t.dims()) + " do not fit input '" + v.name +
                 "' " + v.type.ToString());
  }
  return OkStatus();
}

// One sample folder: each input as NAME.npy, input_K.pb or input_K.npy.
Expected<Sample> LoadSampleFolder(const fs::path& dir, const ir::Graph& g) {
  Sample sample;
  const std::vector<int> feeds = g.RuntimeInputs();
  for (size_t k = 0; k < feeds.size(); ++k) {
    const ir::Value& v = g.values[feeds[k]];
    std::vector<fs::path> names = {dir / ("input_" + std::to_string(k) + ".pb"),
                                   dir / ("input_" + std::to_string(k) + ".npy")};
    if (!v.name.empty() && v.name.find('/') == std::string::npos)
      names.insert(names.begin(), dir / (v.name + ".npy"));
    auto found = std::find_if(names.begin(), names.end(),
                              [](const fs::path& p) { return fs::is_regular_file(p); });
    if (found == names.end()) {
      return Error(dir.string() + ": no file for input '" + v.name + "' (" +
                   names.front().filename().string() + " or input_" + std::to_string(k) + ".pb)");
    }
    KILN_ASSIGN_OR_RETURN(Tensor t, frontend::LoadTensorFile(found->string()));
    KILN_RETURN_IF_ERROR(CheckSampleTensor(t, v, found->string()));
    sample.push_back(std::move(t));
  }
  return sample;
}

Expected<std::vector<Sample>> LoadFolderSamples(const fs::path& dir, const ir::Graph& g) {
  KILN_ASSIGN_OR_RETURN(auto files, SortedEntries(dir, [](const fs::directory_entry& e) {
                          return e.is_regular_file() && IsTensorFile(e.path());
                        }));
  KILN_ASSIGN_OR_RETURN(auto folders, SortedEntries(dir, [](const fs::directory_entry& e) {
                          return e.is_directory();
                        }));
  const std::vector<int> feeds = g.RuntimeInputs();
  std::vector<Sample> samples;
  if (!files.empty()) {
    if (feeds.size() != 1) {
      return Error(dir.string() + ": holds tensor files, but the model has " +
                   std::to_string(feeds.size()) +
                   " inputs; give one folder per sample with a file per input");
    }
    for (const fs::path& f : files) {
      KILN_ASSIGN_OR_RETURN(Tensor t, frontend::LoadTensorFile(f.string()));
      KILN_RETURN_IF_ERROR(CheckSampleTensor(t, g.values[feeds[0]], f.string()));
      samples.push_back({std::move(t)});
    }
    return samples;
  }
  for (const fs::path& f : folders) {
    KILN_ASSIGN_OR_RETURN(Sample s, LoadSampleFolder(f, g));
    samples.push_back(std::move(s));
  }
  return samples;
}

Expected<std::vector<Sample>> LoadBundleSamples(const std::string& path, const ir::Graph& g) {
  KILN_ASSIGN_OR_RETURN(bundle::Bundle b, bundle::LoadBundleFile(path));
  const ir::Graph& bg = *b.program.model.graph;
  const std::vector<int> bundle_feeds = bg.RuntimeInputs();
  std::vector<size_t> position;  // for each of g's inputs, its position in the bundle's
  for (int v : g.RuntimeInputs()) {
    const std::string& name = g.values[v].name;
    auto it = std::find_if(bundle_feeds.begin(), bundle_feeds.end(),
                           [&](int w) { return bg.values[w].name == name; });
    if (it == bundle_feeds.end())
      return Error(path + ": the bundle has no input '" + name + "' of the model");
    position.push_back(static_cast<size_t>(it - bundle_feeds.begin()));
  }
  std::vector<Sample> samples;
  const std::vector<int> feeds = g.RuntimeInputs();
  for (size_t s = 0; s < b.test_sets.size(); ++s) {
    Sample sample;
    for (size_t k = 0; k < position.size(); ++k) {
      const Tensor& t = b.test_sets[s].inputs[position[k]];
      KILN_RETURN_IF_ERROR(CheckSampleTensor(
          t, g.values[feeds[k]],
          path + ": test set " + std::to_string(s) + " input " + std::to_string(position[k])));
      sample.push_back(t);
    }
    samples.push_back(std::move(sample));
  }
  return samples;
}

}  // namespace

Expected<CalibrationMethod> ParseCalibrationMethod(const std::string& name) {
  if (name == "minmax") return CalibrationMethod::kMinMax;
  if (name == "percentile") return CalibrationMethod::kPercentile;
  if (name == "entropy") return CalibrationMethod::kEntropy;
  return Error("unknown calibration method '" + name + "' (minmax, percentile, entropy)");
}

Expected<std::vector<Sample>> LoadSamples(const std::string& path, const ir::Graph& g) {
  std::vector<Sample> samples;
  if (fs::is_directory(path)) {
    KILN_ASSIGN_OR_RETURN(samples, LoadFolderSamples(path, g));
  } else if (fs::path(path).extension() == ".bpte") {
    KILN_ASSIGN_OR_RETURN(samples, LoadBundleSamples(path, g));
  } else {
    return Error(path + ": not a folder of samples or a .bpte bundle");
  }
  if (samples.empty()) {
    return Error(path +
                 ": no calibration samples (tensor files, folders of NAME.npy or input_K.pb, "
                 "or a bundle's test sets)");
  }
  return samples;
}

void RangeCollector::ObserveMinMax(const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(x[i])) continue;
    if (!seen_) {
      lo_ = hi_ = x[i];
      seen_ = true;
    }
    lo_ = std::min(lo_, x[i]);
    hi_ = std::max(hi_, x[i]);
  }
}

bool RangeCollector::StartHistogram(CalibrationMethod method) {
  if (method == CalibrationMethod::kMinMax || !seen_ || lo_ == hi_) return false;
  absolute_ = method == CalibrationMethod::kEntropy;
  hist_lo_ = absolute_ ? 0.0 : lo_;
  const double top = absolute_ ? std::max(std::fabs(lo_), std::fabs(hi_)) : hi_;
  hist_width_ = (top - hist_lo_) / kBins;
  hist_.assign(kBins, 0.0);
  return true;
}

void RangeCollector::ObserveHistogram(const float* x, int64_t n) {
  if (hist_.empty()) return;
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(x[i])) continue;
    const double v = absolute_ ? std::fabs(x[i]) : x[i];
    const double bin = std::floor((v - hist_lo_) / hist_width_);
    hist_[static_cast<size_t>(std::clamp(bin, 0.0, double{kBins - 1}))] += 1;
  }
}

Range RangeCollector::Result(CalibrationMethod method, double percentile) const {
  if (hist_.empty() || method == CalibrationMethod::kMinMax) return {lo_, hi_};
  return method == CalibrationMethod::kPercentile ? PercentileRange(percentile) : EntropyRange();
}

Range RangeCollector::PercentileRange(double percentile) const {
  double total = 0;
  for (double c : hist_) total += c;
  const double tail = total * (1.0 - percentile / 100.0);
  // The lowest bin edge below which at most `tail` values lie, and the highest above which.
  int first = 0, last = kBins - 1;
  for (double below = 0; first < kBins - 1 && below + hist_[first] <= tail; ++first)
    below += hist_[first];
  for (double above = 0; last > first && above + hist_[last] <= tail; --last) above += hist_[last];
  return {static_cast<float>(hist_lo_ + first * hist_width_),
          static_cast<float>(hist_lo_ + (last + 1) * hist_width_)};
}

Range RangeCollector::EntropyRange() const {
  const bool signed_values = lo_ < 0;
  // The zeros a Relu writes would dominate the divergence and pull the threshold down; they
  // count as many as their neighbours (as NVIDIA's pytorch-quantization does).
  std::vector<double> hist = hist_;
  hist[0] = hist[1];
  const int bins = EntropyThresholdBins(hist, signed_values ? 128 : 256);
  const float t = static_cast<float>(bins * hist_width_);
  return signed_values ? Range{-t, t} : Range{0, std::min(t, hi_)};
}

int EntropyThresholdBins(const std::vector<double>& hist, int levels) {
  const int n = static_cast<int>(hist.size());
  if (n <= levels) return n;
  double best = std::numeric_limits<double>::infinity();
  int best_bins = n;
  std::vector<double> p, q;
  for (int i = levels; i <= n; ++i) {
    // p: the first i bins, with the clipped values in the last; q: those i bins' counts merged
    // into `levels` groups, each group's count spread over its non-empty bins.
    p.assign(hist.begin(), hist.begin() + i);
    for (int k = i; k < n; ++k) p[i - 1] += hist[k];
    q.assign(i, 0.0);
    for (int j = 0; j < levels; ++j) {
      const int b0 = static_cast<int>(int64_t{j} * i / levels);
      const int b1 = static_cast<int>(int64_t{j + 1} * i / levels);
      double sum = 0;
      int nonzero = 0;
      for (int k = b0; k < b1; ++k) {
        sum += hist[k];
        nonzero += hist[k] > 0;
      }
      for (int k = b0; k < b1; ++k)
        if (hist[k] > 0) q[k] = sum / nonzero;
    }
    double p_total = 0, q_total = 0;
    for (int k = 0; k < i; ++k) {
      p_total += p[k];
      q_total += q[k];
    }
    if (p_total <= 0 || q_total <= 0) continue;
    double kl = 0;
    for (int k = 0; k < i; ++k) {
      if (p[k] <= 0) continue;
      const double pk = p[k] / p_total, qk = std::max(q[k] / q_total, 1e-12);
      kl += pk * std::log(pk / qk);
    }
    if (kl < best) {
      best = kl;
      best_bins = i;
    }
  }
  return best_bins;
}

}  // namespace kiln::quantize
