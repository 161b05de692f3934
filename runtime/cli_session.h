/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The nsbox subcommands that are clients of nsboxd, and `nsbox tools`.  Each takes its argv
 * (argv[0] the subcommand) and returns the process exit status. */
#pragma once

int nsbox_cmd_create(int argc, char **argv);
int nsbox_cmd_exec(int argc, char **argv);
int nsbox_cmd_call(int argc, char **argv);
int nsbox_cmd_cp(int argc, char **argv);
int nsbox_cmd_ls(int argc, char **argv);
int nsbox_cmd_rm(int argc, char **argv);
int nsbox_cmd_pause(int argc, char **argv);
int nsbox_cmd_resume(int argc, char **argv);
int nsbox_cmd_tools(int argc, char **argv);
