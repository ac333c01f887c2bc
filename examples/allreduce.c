/* The smallest ringreduce program: every rank contributes rank+1 to each of 1024 floats
 * and checks that every element becomes the sum 1 + 2 + ... + size.
 * Run it with:  ringreduce run -n 4 ./allreduce */
#include <stdio.h>
#include <stdlib.h>

#include <ringreduce/ringreduce.h>

#define COUNT 1024

int main(void) {
  rr_comm_t comm;
  int rank, size, i, wrong = 0;
  float *grad = malloc(COUNT * sizeof *grad);
  if (grad == NULL) return 1;
  if (rr_comm_init_from_env(&comm) != RR_SUCCESS) {
    fprintf(stderr, "init failed: %s\n", rr_last_error());
    return 1;
  }
  rr_comm_rank(comm, &rank);
  rr_comm_size(comm, &size);
  for (i = 0; i < COUNT; ++i) grad[i] = (float)(rank + 1);
  if (rr_allreduce(comm, grad, grad, COUNT, RR_FLOAT32, RR_SUM, NULL) != RR_SUCCESS) {
    fprintf(stderr, "rank %d: allreduce failed: %s\n", rank, rr_last_error());
    return 1;
  }
  for (i = 0; i < COUNT; ++i) wrong += grad[i] != (float)(size * (size + 1) / 2);
  printf("rank %d of %d: sum %.0f, %d wrong\n", rank, size, grad[0], wrong);
  rr_comm_destroy(comm);
  free(grad);
  return wrong != 0;
}
