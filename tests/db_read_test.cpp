// Read transactions in the SQL layer, on a SQLite file and, when EINSUMDB_TEST_SERVER names one
// (tests/postgres_test.py starts a server and runs this binary against it), on a PostgreSQL
// server, where BEGIN travels with the transaction's first statement and ROLLBACK is not waited
// for: what a reader sees must not change for it.
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "einsumdb/core/error.hpp"
#include "einsumdb/db/error.hpp"
#include "einsumdb/db/sql.hpp"
#include "einsumdb/tests/support/temp_dir.hpp"

namespace einsumdb::sql {
namespace {

class ReadTransactions : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    if (std::string(GetParam()) == "server") {
      location_ = std::getenv("EINSUMDB_TEST_SERVER");
    } else {
      dir_.emplace("read");
      location_ = dir_->path("read.sqlite");
    }
    Connection c = open();
    if (c.dialect() == Dialect::sqlite) c.exec("PRAGMA journal_mode=WAL");
    c.exec("DROP TABLE IF EXISTS read_test");
    c.exec("CREATE TABLE read_test(x BIGINT NOT NULL)");
    c.exec("INSERT INTO read_test(x) VALUES (1)");
  }
  void TearDown() override {
    if (!location_.empty()) open().exec("DROP TABLE IF EXISTS read_test");
  }

  Connection open() const {
    return is_server_uri(location_) ? Connection::postgres(location_)
                                    : Connection(location_, false, true);
  }

  static std::int64_t rows(Connection& c) { return c.query_int("SELECT count(*) FROM read_test"); }

  std::optional<einsumdb::testing::TempDir> dir_;
  std::string location_;
};

TEST_P(ReadTransactions, SeeOneSnapshotUntilTheyEnd) {
  Connection reader = open(), writer = open();
  reader.begin_read();
  EXPECT_EQ(rows(reader), 1);
  writer.exec("INSERT INTO read_test(x) VALUES (2)");
  EXPECT_EQ(rows(reader), 1) << "a commit made after the snapshot was taken is not seen in it";
  reader.end_read();
  EXPECT_EQ(rows(reader), 2) << "the statement after end_read() sees the commit";
  // Again, back to back: the end of one read transaction and the start of the next.
  reader.begin_read();
  EXPECT_EQ(rows(reader), 2);
  writer.exec("INSERT INTO read_test(x) VALUES (3)");
  reader.end_read();
  reader.begin_read();
  EXPECT_EQ(rows(reader), 3);
  reader.end_read();
}

TEST_P(ReadTransactions, AFailingFirstStatementLeavesTheConnectionUsable) {
  Connection c = open();
  c.begin_read();
  Statement bad = c.prepare("SELECT x FROM read_test WHERE x = CAST(? AS BIGINT)");
  bad.bind(1, std::string("not a number"));
  if (c.dialect() == Dialect::postgres) {
    EXPECT_THROW(bad.step(), DatabaseError);
  } else {
    EXPECT_FALSE(bad.step());  // SQLite casts the text to 0: no row, no error
  }
  c.end_read();
  EXPECT_EQ(rows(c), 1);
  // A write transaction begins and commits as on a fresh connection.
  c.begin();
  c.exec("INSERT INTO read_test(x) VALUES (4)");
  c.exec("COMMIT");
  Connection fresh = open();
  EXPECT_EQ(rows(fresh), 2);
}

TEST_P(ReadTransactions, OneEndedBeforeAnyStatementLeavesNoTransactionOpen) {
  Connection c = open(), other = open();
  c.begin_read();
  c.end_read();
  other.exec("INSERT INTO read_test(x) VALUES (5)");
  EXPECT_EQ(rows(c), 2);
  // A statement that is not prepared (exec) also runs inside a read transaction, and takes its
  // snapshot when it reads.
  c.begin_read();
  c.exec("SELECT count(*) FROM read_test");
  other.exec("INSERT INTO read_test(x) VALUES (6)");
  EXPECT_EQ(rows(c), 2);
  c.end_read();
  EXPECT_EQ(rows(c), 3);
}

// The server's tests exist only where a server is named: ctest runs the file's, and
// postgres_test.py the server's.
std::vector<const char*> backends() {
  const char* server = std::getenv("EINSUMDB_TEST_SERVER");
  if (server && *server) return {"sqlite", "server"};
  return {"sqlite"};
}

INSTANTIATE_TEST_SUITE_P(Backends, ReadTransactions, ::testing::ValuesIn(backends()),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace
}  // namespace einsumdb::sql
