/* A policy plugin whose every answer is a script chosen by the fuzzer (see fuzz_policy_plugin.c). */
#pragma once
