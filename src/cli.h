/*
** cli.h -- the command-line front end (the only code that prints or exits).
*/
#ifndef SM_CLI_H
#define SM_CLI_H

/* Runs `smallmind argv...`; returns the process exit code (0, 1, 2, 130). */
int sm_cli_main(int argc, char **argv);

#endif
