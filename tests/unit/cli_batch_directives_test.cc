#include <gtest/gtest.h>

#include "cli/batch_directives.h"

namespace corral::cli {
namespace {

using Words = std::vector<std::string>;

TEST(CliSplitWords, ShellLikeQuoting) {
  EXPECT_EQ(*split_words("  -N 2  --job-name=x "), (Words{"-N", "2", "--job-name=x"}));
  EXPECT_EQ(*split_words("-J 'my job' -o \"a b\"c"), (Words{"-J", "my job", "-o", "a bc"}));
  EXPECT_EQ(*split_words(R"(-J "say \"hi\"" a\ b)"), (Words{"-J", "say \"hi\"", "a b"}));
  EXPECT_EQ(*split_words("-N 2 # two nodes"), (Words{"-N", "2"}));
  EXPECT_EQ(*split_words("-J a#b"), (Words{"-J", "a#b"}));
  EXPECT_EQ(*split_words("''"), (Words{""}));
  EXPECT_TRUE(split_words("")->empty());
  EXPECT_FALSE(split_words("-J 'open").ok());
  EXPECT_FALSE(split_words("-J \"open").ok());
}

TEST(CliDirectives, OnlyTheHeaderCounts) {
  const std::string script =
      "#!/bin/bash\n"
      "# a comment\n"
      "\n"
      "#CORRAL -N 2\n"
      "#CORRALX not a directive\n"
      "  #CORRAL --job-name 'x y'\n"
      "echo hi\n"
      "#CORRAL -N 9\n";
  auto d = find_directives(script);
  ASSERT_TRUE(d.ok()) << d.message();
  ASSERT_EQ(d->size(), 2u);
  EXPECT_EQ((*d)[0].line, 4u);
  EXPECT_EQ((*d)[0].words, (Words{"-N", "2"}));
  EXPECT_EQ((*d)[1].line, 6u);
  EXPECT_EQ((*d)[1].words, (Words{"--job-name", "x y"}));
}

TEST(CliDirectives, NeedsAShebang) {
  auto d = find_directives("#CORRAL -N 2\necho\n");
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.message().find("#!"), std::string::npos);
}

JobContext ctx() { return {"/w", {}, 1700000000, {}}; }

TEST(CliDirectives, OptionsMergeInOrder) {
  auto o = directive_options("#!/bin/sh\n#CORRAL -N 2 -t 5\n#CORRAL -N 3\n", "s.sh", ctx());
  ASSERT_TRUE(o.ok()) << o.message();
  EXPECT_EQ(o->nodes, "3");
  EXPECT_EQ(o->time, "5");
}

TEST(CliDirectives, ErrorsNameFileLineAndDirective) {
  auto o = directive_options("#!/bin/sh\n\n#CORRAL --nodes=x\n", "script.sh", ctx());
  ASSERT_FALSE(o.ok());
  EXPECT_EQ(o.message().rfind("script.sh:3: #CORRAL --nodes=x: -N/--nodes", 0), 0u) << o.message();
  auto unknown = directive_options("#!/bin/sh\n#CORRAL --bogus\n", "s", ctx());
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.message().rfind("s:2: #CORRAL --bogus: ", 0), 0u) << unknown.message();
  auto quote = directive_options("#!/bin/sh\n#CORRAL -J 'x\n", "s", ctx());
  ASSERT_FALSE(quote.ok());
  EXPECT_EQ(quote.message().rfind("s:2: ", 0), 0u) << quote.message();
  auto shebang = directive_options("echo\n", "s", ctx());
  ASSERT_FALSE(shebang.ok());
  EXPECT_EQ(shebang.message().rfind("s:1: ", 0), 0u) << shebang.message();
}

}  // namespace
}  // namespace corral::cli
