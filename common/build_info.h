#pragma once
// What was built: the project version and the git commit of the source tree
// (from `git describe` when CMake configured; "unknown" outside a git tree).

namespace rocefab {

const char* BuildVersion();
const char* BuildCommit();

}  // namespace rocefab
