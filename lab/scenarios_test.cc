// Every shipped scenario loads, builds its fabric and model, and runs: the
// files in lab/scenarios stay in step with the schema and the model.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "common/config_loader.h"
#include "lab/fabric_model.h"
#include "lab/runner.h"
#include "rocefab/v1/control.pb.h"
#include "tests/support/test_support.h"

namespace rocefab::lab {
namespace {

TEST(ShippedScenarios, LoadAndRun) {
  const std::filesystem::path dir = std::string(ROCEFAB_SOURCE_DIR) + "/lab/scenarios";
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".yaml") continue;
    ++count;
    SCOPED_TRACE(entry.path().filename().string());
    auto scenario = LoadScenario(entry.path().string());
    ASSERT_TRUE(scenario.ok()) << scenario.status();
    auto topology = TopologyForScenario(*scenario, entry.path().string());
    ASSERT_TRUE(topology.ok()) << topology.status();
    auto model = FabricModel::Create(*topology, *scenario);
    ASSERT_TRUE(model.ok()) << model.status();
    while ((*model)->now_s() < scenario->duration_s()) (*model)->Step(scenario->tick_s(), nullptr);
    for (const auto& job : (*model)->jobs()) EXPECT_GE(job.busbw_gbs, 0) << job.id;
    for (const std::string& policy_file :
         [&] {
           std::vector<std::string> files;
           if (!scenario->policy().empty()) files.push_back(scenario->policy());
           for (const auto& change : scenario->policy_changes()) files.push_back(change.policy());
           return files;
         }()) {
      v1::Policy policy;
      EXPECT_TRUE(LoadYamlConfigFile((dir / policy_file).string(), &policy).ok()) << policy_file;
    }
  }
  EXPECT_GE(count, 15);
}

// The NICs' stall prevention timeout takes what mlx5 accepts, 80 to 8000
// ms, or 0 for off; anything else is refused with the file and the key.
TEST(ScenarioFile, NicStallTimeoutOutsideWhatMlx5AcceptsIsRefused) {
  testing::TempDir dir;
  for (const auto& [value, ok] : std::vector<std::pair<std::string, bool>>{
           {"0", true}, {"80", true}, {"100", true}, {"8000", true}, {"79", false}, {"8001", false}}) {
    const std::string path = dir / ("s" + value + ".yaml");
    std::ofstream(path) << "topology: {generate: {zones: 1}}\njobs: [{id: \"1\", num_hosts: 2}]\n"
                        << "nic_stall_timeout_ms: " << value << "\n";
    auto scenario = LoadScenario(path);
    EXPECT_EQ(scenario.ok(), ok) << value << ": " << scenario.status();
    if (!ok) {
      EXPECT_NE(scenario.status().message().find("nic_stall_timeout_ms"), std::string::npos);
    }
  }
}

}  // namespace
}  // namespace rocefab::lab
