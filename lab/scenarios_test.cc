// Every shipped scenario loads, builds its fabric and model, and runs: the
// files in lab/scenarios stay in step with the schema and the model.
#include <gtest/gtest.h>

#include <filesystem>

#include "common/config_loader.h"
#include "lab/fabric_model.h"
#include "lab/runner.h"
#include "rocefab/v1/control.pb.h"

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

}  // namespace
}  // namespace rocefab::lab
