// The `baton` executable: everything happens in cli_main (main.cpp).
#include "commands.h"

int main(int argc, char** argv) { return baton::tool::cli_main(argc, argv); }
