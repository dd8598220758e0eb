// #CORRAL / #SBATCH directives of batch scripts.
#include "cli/batch_directives.h"
#include "fuzz_target.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto text = fuzz_text(data, size);
  (void)corral::cli::split_words(text);
  corral::cli::JobContext ctx;
  ctx.cwd = "/home/u";
  ctx.now = 1700000000;
  (void)corral::cli::directive_options(text, "fuzz.sh", ctx);
  return 0;
}
