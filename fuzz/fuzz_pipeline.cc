// Any bytes as a pipeline file (kiln compile --pipeline, written by kiln tune).
#include <string>

#include "passes/pipeline.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)kiln::passes::ParsePipeline(std::string(reinterpret_cast<const char*>(data), size),
                                    "fuzz.json");
  return 0;
}
