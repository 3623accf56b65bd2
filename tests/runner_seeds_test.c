/* The secrets of a runner's case (gpuexec/runner/runner_case.h, rn_case_seeds): the
 * timed inputs' seed follows the job's seed; the poison's, the rotation's, the
 * verification draw's and the checksum keys do not, so the poison a candidate reads
 * (and can invert: splitmix64) tells it nothing of the inputs. Before the fix every one
 * was ka_mix64(job seed, tag + case): this test then fails on poison_not_derived. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "data.h"
#include "ka_check.h"
#include "runner_case.h"

int main(void) {
  rn_seeds a, b;
  uint64_t job = 0x1234567890abcdefULL;
  rn_case_seeds(job, 2, 0, &a);
  rn_case_seeds(job, 2, 0, &b);
  check(a.in == b.in && a.in == ka_mix64(job, 0x6672657368000000ULL + 2), "inputs_follow_job",
        "in %llx %llx", (unsigned long long)a.in, (unsigned long long)b.in);
  check(a.poison != b.poison && a.sum != b.sum && a.ver != b.ver && a.rot != b.rot &&
            a.trial_sum != b.trial_sum,
        "own_seeds_drawn_anew", "poison %llx then %llx", (unsigned long long)a.poison,
        (unsigned long long)b.poison);
  /* the derivation before the fix, and its neighbours: none of them */
  int derived = 0;
  for (uint64_t tag = 0; tag < 64; tag++)
    derived |= a.poison == ka_mix64(job, 0x706f69736f6e0000ULL + tag) ||
               a.poison == ka_mix64(a.in, tag) || a.poison == ka_mix64(job, tag);
  check(!derived, "poison_not_derived", "poison %llx", (unsigned long long)a.poison);
  uint64_t v[6] = {a.in, a.poison, a.rot, a.ver, a.sum, a.trial_sum};
  int same = 0;
  for (int i = 0; i < 6; i++)
    for (int j = i + 1; j < 6; j++) same += v[i] == v[j];
  check(same == 0, "seeds_distinct", "%d equal pairs", same);
  /* reproducible (an admin's Evaluate): every seed follows the job, case by case */
  rn_seeds r1, r2, r3;
  rn_case_seeds(job, 2, 1, &r1);
  rn_case_seeds(job, 2, 1, &r2);
  rn_case_seeds(job, 3, 1, &r3);
  check(!memcmp(&r1, &r2, sizeof r1) && r1.in == a.in, "reproducible_repeats",
        "poison %llx then %llx", (unsigned long long)r1.poison, (unsigned long long)r2.poison);
  check(r1.poison != r3.poison && r1.ver != r3.ver && r1.poison != a.poison,
        "reproducible_per_case", "case 2 %llx, case 3 %llx", (unsigned long long)r1.poison,
        (unsigned long long)r3.poison);
  printf("%d passed, %d failed\n", ka_check_pass, ka_check_fail);
  return ka_check_fail ? 1 : 0;
}
