#pragma once
// How a diagnosis ranks its findings and pools shards' anomalies, shared by the collector (one shard's
// diagnosis) and the CLI (merging shards), so both rank the same way.

#include <cstdint>
#include <string>
#include <vector>

#include "rocefab/v1/diagnosis.pb.h"

namespace rocefab {

// Kinds that are how a fault shows rather than what it is: pause victims,
// RDMA loss, buffer levels and the job's own slowdown or stall.
bool IsConsequenceKind(const std::string& kind);

// A severity's lower-case name ("critical", "warning", "info"); `unset` for
// any other value.
const char* SeverityName(v1::Severity severity, const char* unset = "unknown");

// Every root cause first, across faults: a finding whose kind is a cause
// and that nothing else explains; then consequence kinds nothing explains;
// then consequences of another finding. Within each, highest confidence
// first; among equals, one that began at or after `news_from_us` (the
// window asked about) before one that was already there, then the earlier
// start. Stable.
void RankFindings(std::vector<v1::Finding>& findings, int64_t news_from_us = 0);
// The first cause among ranked findings, else the first finding, else null.
const v1::Finding* TopFinding(const v1::DiagnoseJobResponse& diagnosis);

// How far from a slowdown's onset a version change on the job's paths
// counts as what changed: from 30 minutes before (an image or firmware
// rollout reaches a switch well before the jobs on it notice) to 10 s
// after (an agent reports a new version at its next poll).
inline constexpr int64_t kChangeLeadUs = 30LL * 60 * 1'000'000, kChangeLagUs = 10'000'000;

// A version change in words, "(none)" standing for an empty version:
// "os lab-1.0 -> lab-2.7" (ChangeArrow, for tables and evidence notes) and
// "z1-ctsw01 changed os from lab-1.0 to lab-2.7 at 11:10:26Z"
// (ChangeSentence, for summaries and verdicts).
std::string ChangeArrow(const v1::ComponentChange& change);
std::string ChangeSentence(const v1::ComponentChange& change);

// The one-line verdict of a diagnosis, from its structured fields (state,
// busbw figures, degraded intervals, ranked findings), so one shard's answer
// and a merged one read alike. docs/diagnosis.md describes each state.
std::string ComposeVerdict(const v1::DiagnoseJobResponse& diagnosis);

// Evidence that states a level (a job's busbw and its baseline, a kernel
// time, seconds without a collective, a config generation) rather than a
// counter's movement: a newer reading replaces it instead of adding to it.
bool IsLevelEvidence(const std::string& counter);

// One evidence counter in its own unit: "z1-r02-h1/mlx5_0 pfc_tx_pause_us
// 812.4 ms in the interval, peak 801.0 ms/s (80% of the time)", "job 4711
// busbw 66.6 GB/s vs baseline 109.2 GB/s". Shared by the CLI and the
// alerts' annotations.
std::string FormatEvidence(const v1::Evidence& evidence);

// A finding's evidence as an operator reads it: each counter's entries
// together, counters in the order the detector first gave them, and within
// a counter the strongest (highest peak) first. A full finding's
// replacements land where the entry they replaced stood, so the stored
// order alone says nothing about strength.
google::protobuf::RepeatedPtrField<v1::Evidence> StrongestFirst(
    const google::protobuf::RepeatedPtrField<v1::Evidence>& evidence);

// Anomaly ids are per collector: pooling several shards' anomalies, each
// shard's ids (and caused_by links) get its index in the top 16 bits.
void TagWithShard(v1::Anomaly& anomaly, size_t shard);

}  // namespace rocefab
