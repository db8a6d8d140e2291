// FailureLatch on its own: no file, no stop; a trip writes the failure (mode 0600, the first one
// kept) and every check names the file and the failure; a latch it cannot read or write fails
// closed or says so.
#include "mobile_client/failure_latch.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/server/two_servers.h"

namespace veil::client {
namespace {

using ::testing::HasSubstr;

std::string Contents(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(FailureLatchTest, ATripStopsEveryCheckUntilTheFileIsRemoved) {
  const std::string path = testing::TempPath("latch");
  const FailureLatch latch(path);
  EXPECT_TRUE(latch.Check().ok());

  const absl::Status failed = latch.Trip(absl::DataLossError("row 7 fails its tag"));
  EXPECT_TRUE(absl::IsDataLoss(failed));
  EXPECT_THAT(failed.message(), HasSubstr("row 7 fails its tag; lookups stop until " + path +
                                          " is removed (the failure latch)"));
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_THAT(Contents(path), HasSubstr("DATA_LOSS: row 7 fails its tag\n"));

  // Any latch on the same path is stopped, naming the file and the failure.
  for (const FailureLatch& l : {latch, FailureLatch(path)}) {
    const absl::Status s = l.Check();
    EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
    EXPECT_THAT(s.message(), HasSubstr("lookups are stopped by the failure latch " + path));
    EXPECT_THAT(s.message(), HasSubstr("DATA_LOSS: row 7 fails its tag"));
  }
  // A second failure keeps the first on record.
  const absl::Status again = FailureLatch(path).Trip(absl::InternalError("malformed answer"));
  EXPECT_TRUE(absl::IsInternal(again));
  EXPECT_THAT(again.message(), HasSubstr("already records a failure"));
  EXPECT_THAT(Contents(path), ::testing::Not(HasSubstr("malformed")));

  ASSERT_EQ(unlink(path.c_str()), 0);
  EXPECT_TRUE(latch.Check().ok());
}

TEST(FailureLatchTest, WithoutAPathNothingIsWrittenOrStopped) {
  const FailureLatch none;
  EXPECT_TRUE(none.Check().ok());
  EXPECT_EQ(none.Trip(absl::DataLossError("x")), absl::DataLossError("x"));
  EXPECT_TRUE(none.Check().ok());
}

TEST(FailureLatchTest, WhateverIsAtThePathStopsLookups) {
  // A folder, a dangling link and a FIFO where the file should be: something is there, so
  // lookups stay stopped (failing closed), and Check never blocks.
  const std::string folder = testing::TempPath("latch_folder");
  ASSERT_EQ(mkdir(folder.c_str(), 0700), 0);
  const std::string link = testing::TempPath("latch_link");
  ASSERT_EQ(symlink(testing::TempPath("nothing_there").c_str(), link.c_str()), 0);
  const std::string fifo = testing::TempPath("latch_fifo");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  for (const std::string& path : {folder, link, fifo}) {
    const absl::Status s = FailureLatch(path).Check();
    EXPECT_TRUE(absl::IsFailedPrecondition(s)) << path << ": " << s;
    // A trip there keeps what is there.
    EXPECT_THAT(FailureLatch(path).Trip(absl::DataLossError("x")).message(),
                HasSubstr("already records a failure"))
        << path;
  }
  EXPECT_THAT(FailureLatch(link).Check().message(), HasSubstr("cannot be read"));
}

TEST(FailureLatchTest, ALatchThatCannotBeWrittenStopsThisProcess) {
  // A path in a folder that does not exist is refused before any lookup...
  const std::string nowhere = testing::TempPath("no_such_folder") + "/latch";
  const absl::Status refused = FailureLatch(nowhere).Check();
  EXPECT_TRUE(absl::IsInvalidArgument(refused)) << refused;
  EXPECT_THAT(refused.message(), HasSubstr("is in no folder that exists"));
  // ...and a failure that cannot be written there stops this process's lookups all the same.
  const absl::Status t = FailureLatch(nowhere).Trip(absl::DataLossError("row 1"));
  EXPECT_TRUE(absl::IsDataLoss(t));
  EXPECT_THAT(t.message(), HasSubstr("the failure latch " + nowhere +
                                     " could not be written (No such file or directory): lookups "
                                     "stop in this process only"));
  const absl::Status s = FailureLatch(nowhere).Check();
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("the file could not be written"));
}

TEST(FailureLatchTest, AFolderThatTakesNoNewFileIsRefused) {
  // /proc/self exists, but nobody, root included, can make a file there: before, the latch was
  // accepted, and a failure it could not record stopped only the process that saw it.
  const absl::Status refused = FailureLatch("/proc/self/veil-latch").Check();
  EXPECT_TRUE(absl::IsInvalidArgument(refused)) << refused;
  EXPECT_THAT(refused.message(),
              HasSubstr("the failure latch /proc/self/veil-latch could not be written in its "
                        "folder"));
  // A writable folder is accepted, and the probe leaves nothing in it.
  const std::string folder = testing::TempPath("latch_folder");
  ASSERT_EQ(mkdir(folder.c_str(), 0700), 0);
  EXPECT_TRUE(FailureLatch(folder + "/latch").Check().ok());
  DIR* dir = opendir(folder.c_str());
  ASSERT_NE(dir, nullptr);
  int entries = 0;
  while (readdir(dir) != nullptr) ++entries;
  closedir(dir);
  EXPECT_EQ(entries, 2) << "only . and ..";
}

}  // namespace
}  // namespace veil::client
