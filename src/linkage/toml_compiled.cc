// toml++'s compiled part, built into executables that start per user action instead of
// loading libtomlplusplus.so (see fmt_compiled.cc for why). The consumers' headers are
// configured for the shared library (TOML_HEADER_ONLY=0); this is its implementation.
#define TOML_IMPLEMENTATION 1
// corral reads TOML and never prints it: without the formatters nothing here calls libm
// (log10), which the corral command then does not load (src/cli/CMakeLists.txt).
#define TOML_ENABLE_FORMATTERS 0
#include <toml++/toml.h>
