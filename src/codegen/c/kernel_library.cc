#include "codegen/c/kernel_library.h"

#include <functional>
#include <map>
#include <sstream>

namespace kiln::codegen::c {

const std::map<std::string, std::string>& EmbeddedSources();  // generated

namespace {

std::vector<std::string> Needs(const std::string& text) {
  std::vector<std::string> out;
  if (text.rfind("/* needs:", 0) != 0) return out;
  std::istringstream line(text.substr(9, text.find("*/") - 9));
  std::string w;
  while (line >> w) out.push_back(w);
  return out;
}

}  // namespace

const std::string* KernelSource(const std::string& name) {
  const auto& m = EmbeddedSources();
  auto it = m.find(name);
  return it == m.end() || name == "kiln_driver" ? nullptr : &it->second;
}

std::vector<std::string> KernelClosure(const std::set<std::string>& wanted) {
  std::vector<std::string> order;
  std::set<std::string> done;
  std::function<void(const std::string&)> visit = [&](const std::string& k) {
    if (!done.insert(k).second) return;
    const std::string* src = KernelSource(k);
    KILN_CHECK(src != nullptr, "unknown C kernel " + k);
    for (const auto& d : Needs(*src)) visit(d);
    order.push_back(k);
  };
  for (const auto& k : wanted) visit(k);
  return order;
}

const std::string& DriverSource() { return EmbeddedSources().at("kiln_driver"); }

}  // namespace kiln::codegen::c
