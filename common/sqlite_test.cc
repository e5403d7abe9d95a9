// The SQLite helper on a real file: binds, steps, errors and snapshots.
#include "common/sqlite.h"

#include <gtest/gtest.h>

#include "tests/support/test_support.h"

namespace rocefab::sqlite {
namespace {

TEST(Sqlite, BindsStepsAndRebindsAfterAHalfReadResult) {
  testing::TempDir dir;
  auto db = Db::Open(dir / "t.db", {});
  ASSERT_TRUE(db.ok()) << db.status();
  ASSERT_TRUE(Exec(db->get(), "CREATE TABLE t(k INTEGER, v TEXT, b BLOB)").ok());
  Stmt put(db->get(), "INSERT INTO t VALUES(?1, ?2, ?3)");
  for (int i = 0; i < 3; ++i) {
    put.Bind(1, int64_t{i}).Bind(2, std::string_view("v")).BindBlob(3, std::string("\0x", 2));
    ASSERT_TRUE(put.Run().ok());
  }
  Stmt get(db->get(), "SELECT k, v, b FROM t WHERE k >= ?1 ORDER BY k");
  get.Bind(1, int64_t{0});
  ASSERT_TRUE(*get.Step());
  EXPECT_EQ(get.Int(0), 0);
  EXPECT_EQ(get.Blob(2), std::string_view("\0x", 2));
  // Rebinding mid-result starts a new round.
  get.Bind(1, int64_t{2});
  ASSERT_TRUE(*get.Step());
  EXPECT_EQ(get.Int(0), 2);
  EXPECT_FALSE(*get.Step());
}

TEST(Sqlite, BadSqlAndMissingFilesAreErrors) {
  testing::TempDir dir;
  auto db = Db::Open(dir / "t.db", {});
  ASSERT_TRUE(db.ok());
  Stmt bad(db->get(), "SELEKT 1");
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("SELEKT"), std::string::npos);
  EXPECT_FALSE(bad.Step().ok());
  OpenOptions read_only;
  read_only.read_only = true;
  EXPECT_FALSE(Db::Open(dir / "missing/x.db", read_only).ok());
}

TEST(Sqlite, AReadTransactionIsOneSnapshot) {
  testing::TempDir dir;
  auto writer = Db::Open(dir / "t.db", {});
  ASSERT_TRUE(writer.ok());
  ASSERT_TRUE(Exec(writer->get(), "CREATE TABLE t(k INTEGER); INSERT INTO t VALUES(1)").ok());
  OpenOptions ro;
  ro.read_only = true;
  auto reader = Db::Open(dir / "t.db", ro);
  ASSERT_TRUE(reader.ok());
  Stmt count(reader->get(), "SELECT count(*) FROM t");
  {
    ReadTransaction txn(reader->get());
    ASSERT_TRUE(txn.status().ok());
    ASSERT_TRUE(*count.Step());
    EXPECT_EQ(count.Int(0), 1);
    count.Reset();
    ASSERT_TRUE(Exec(writer->get(), "INSERT INTO t VALUES(2)").ok());
    ASSERT_TRUE(*count.Step());
    EXPECT_EQ(count.Int(0), 1) << "the snapshot does not see a later commit";
    count.Reset();
  }
  ASSERT_TRUE(*count.Step());
  EXPECT_EQ(count.Int(0), 2);
}

}  // namespace
}  // namespace rocefab::sqlite
