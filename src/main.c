/*
** main.c -- process entry point.
*/
#include "cli.h"

int main(int argc, char **argv) {
    return sm_cli_main(argc, argv);
}
