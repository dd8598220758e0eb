// The `steps` table (finished steps of jobs, for accounting) and the queries that read it
// with the jobs table: one job's steps, and `corral history`. Store owns the connections
// and their locks; these functions only speak SQL.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "store/sqlite_db.h"
#include "store/store.h"

namespace corral::store {

// Appended to the store's schema (created with IF NOT EXISTS, so older databases gain it).
extern const char* const kStepsSchema;
// The statement write_step binds: prepare it once on the writer connection.
extern const char* const kPutStepSql;

Status write_step(Db& db, Stmt& put_step, const StepRecord& step);
Result<std::vector<StepRecord>> query_steps(Db& db, uint64_t jobid, std::optional<uint32_t> userid);
Result<std::vector<HistoryEntry>> query_history(Db& db, const HistoryQuery& q);

}  // namespace corral::store
