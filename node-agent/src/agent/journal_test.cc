#include "star/agent/journal.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "agent/temp_dir_for_test.h"

namespace star::agent {
namespace {

namespace fs = std::filesystem;

using testing_support::TempDir;

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

JournalEntry Entry() {
  JournalEntry e;
  e.cpu = CpuOriginal{"kubepods/burstable/podabc", CpuLimits{50000, 100000, 39}};
  e.net = NetOriginal{"veth0", NetLimits{1000, 0, 3}};
  return e;
}

TEST(JournalTest, MissingFileIsEmptyAndCommitPersistsAtomically) {
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  const std::string path = dir.path() + "/journal.json";
  auto j = Journal::Open(path);
  ASSERT_TRUE(j.ok()) << j.status();
  EXPECT_TRUE(j->entries().empty());
  ASSERT_TRUE(j->Commit({{"abc", Entry()}}).ok());
  EXPECT_FALSE(fs::exists(path + ".tmp"));

  auto again = Journal::Open(path);
  ASSERT_TRUE(again.ok()) << again.status();
  ASSERT_NE(again->Find("abc"), nullptr);
  EXPECT_EQ(*again->Find("abc"), Entry());

  ASSERT_TRUE(again->Commit({{"abc", std::nullopt}}).ok());
  auto empty = Journal::Open(path);
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->entries().empty());
}

TEST(JournalTest, EmptyCommitDoesNotWrite) {
  Journal j = Journal::InMemory();
  ASSERT_TRUE(j.Commit({}).ok());
  EXPECT_EQ(j.writes(), 0);
}

TEST(JournalTest, FailedCommitChangesNothing) {
  TempDir dir;
  const std::string path = dir.path() + "/missing-dir/journal.json";
  auto j = Journal::Open(path);
  ASSERT_TRUE(j.ok());
  Status s = j->Commit({{"abc", Entry()}});
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_EQ(j->Find("abc"), nullptr);
}

TEST(JournalTest, CorruptJournalIsRefusedWithAClearError) {
  TempDir dir;
  const std::string path = dir.path() + "/journal.json";
  const std::string good = SerializeJournal({{"abc", Entry()}});
  for (const std::string& text :
       {std::string("{not json"), good.substr(0, good.size() / 2), std::string("[]"),
        std::string(R"({"version":2,"pods":{}})"),
        std::string(R"({"version":1,"pods":{"../etc":{}}})"),
        std::string(R"({"version":1,"pods":{"abc":{"cpu":{"cgroup":"/etc","quotaUs":1,)"
                    R"("periodUs":1,"weight":1}}}})"),
        std::string(R"({"version":1,"pods":{"abc":{"cpu":{"cgroup":"a/../b","quotaUs":1,)"
                    R"("periodUs":1,"weight":1}}}})"),
        std::string(R"({"version":1,"pods":{"abc":{"cpu":{"cgroup":"a","quotaUs":"x",)"
                    R"("periodUs":1,"weight":1}}}})"),
        std::string(R"({"version":1,"pods":{"abc":{"surprise":1}}})"),
        // Out of what the kernel can hold (and of what arithmetic on them survives).
        std::string(R"({"version":1,"pods":{"abc":{"cpu":{"cgroup":"a","quotaUs":9223372036854775807,)"
                    R"("periodUs":100000,"weight":1}}}})"),
        std::string(R"({"version":1,"pods":{"abc":{"cpu":{"cgroup":"a","quotaUs":-1,)"
                    R"("periodUs":0,"weight":1}}}})"),
        std::string(R"({"version":1,"pods":{"abc":{"cpu":{"cgroup":"a","quotaUs":-1,)"
                    R"("periodUs":100000,"weight":0}}}})"),
        std::string(R"({"version":1,"pods":{"abc":{"net":{"interface":"veth0",)"
                    R"("egressBitsPerSecond":-8,"ingressBitsPerSecond":0,"priority":0}}}})")}) {
    WriteFile(path, text);
    auto j = Journal::Open(path);
    ASSERT_FALSE(j.ok()) << text;
    EXPECT_EQ(j.status().code(), StatusCode::kFailedPrecondition);
    EXPECT_NE(j.status().message().find("corrupt"), std::string::npos) << j.status();
  }
}

TEST(JournalTest, RoundTripsThroughText) {
  JournalEntries e = {{"abc", Entry()}, {"def", JournalEntry{Entry().cpu, std::nullopt}}};
  auto parsed = ParseJournal(SerializeJournal(e));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(*parsed, e);
}

}  // namespace
}  // namespace star::agent
