// The program's body is RocefabCliMain in cli_main.cc, compiled with its library
// (common/program_main.h says why).
#include "common/program_main.h"

int main(int argc, char** argv) { return RocefabCliMain(argc, argv); }
