#pragma once
// The programs' entry points. Each program's body lives in its own library,
// beside the code it wires, so that the gRPC, protobuf and CLI11 headers it
// needs are parsed once, in the library's compile unit, and main.cc, which
// only calls it, compiles in a moment (docs/performance.md, "Building").

int RocefabHostdMain(int argc, char** argv);        // agents/host/hostd_main.cc
int RocefabSwitchdMain(int argc, char** argv);      // agents/switch/switchd_main.cc
int RocefabCollectordMain(int argc, char** argv);   // collector/collectord_main.cc
int RocefabControllerdMain(int argc, char** argv);  // controller/controllerd_main.cc
int RocefabCliMain(int argc, char** argv);          // cli/cli_main.cc
int RocefabLabMain(int argc, char** argv);          // lab/lab_main.cc
