// The program's body is RocefabHostdMain in hostd_main.cc, compiled with its library
// (common/program_main.h says why).
#include "common/program_main.h"

int main(int argc, char** argv) { return RocefabHostdMain(argc, argv); }
