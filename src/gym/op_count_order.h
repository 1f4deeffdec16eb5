// The positions of the OpCount observation: one per op (domain-qualified outside the default
// domain, "com.microsoft.FusedConv"). The list is frozen and versioned so that the vector an agent
// was trained on keeps its meaning: version 1 holds the ops of 2026-12-05 in sorted order, and an
// op added later is appended at the end (gym_test checks that every registered op is listed).
#pragma once

#include <string>
#include <vector>

namespace kiln::gym {

inline constexpr int kOpCountVersion = 1;

const std::vector<std::string>& OpCountOrder();

}  // namespace kiln::gym
