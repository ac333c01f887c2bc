/* A data-parallel trainer in plain C that uses only the public header.
 *
 * A two-layer MLP (16 inputs, 32 tanh units, 1 output) learns a fixed random "teacher"
 * network on a seeded synthetic data set. Every step takes a global batch of 64 samples;
 * each rank computes the gradient of its shard (64 / size samples). Rank 0 broadcasts the
 * initial weights. The backward pass submits each layer's gradient bucket with
 * rr_allreduce_async(..., RR_AVG, ...) as soon as that layer's gradient is ready and goes
 * on with the next layer meanwhile; it waits for both buckets before the SGD step. The
 * result equals one rank training on the whole 64-sample batch, up to rounding.
 *
 * Usage: ringreduce run -n 4 ./trainer [--epochs N] [--out FILE]
 *   --out FILE  rank 0 writes the final weights there (doubles, W1 b1 W2 b2). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ringreduce/ringreduce.h>

#define IN 16
#define HID 32
#define SAMPLES 1024
#define BATCH 64
/* Layer 2 (W2: HID, b2: 1) and layer 1 (W1: HID x IN, b1: HID) are one bucket each. */
#define L2 (HID + 1)
#define L1 (HID * IN + HID)

static unsigned long long rng_state = 2026;
static double uniform(void) { /* deterministic on every rank: a 64-bit LCG */
  rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
  return (double)(rng_state >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}

static double x_data[SAMPLES][IN], y_data[SAMPLES];

static void check(rr_result_t rc, const char *what) {
  if (rc != RR_SUCCESS) {
    fprintf(stderr, "trainer: %s failed: %s: %s\n", what, rr_result_string(rc), rr_last_error());
    exit(1);
  }
}

/* The teacher: y = sum_j v_j tanh(u_j . x) with its own random weights, plus noise. */
static void make_data(void) {
  double u[8][IN], v[8];
  int i, j, k;
  for (j = 0; j < 8; ++j) {
    for (k = 0; k < IN; ++k) u[j][k] = uniform();
    v[j] = uniform();
  }
  for (i = 0; i < SAMPLES; ++i) {
    double y = 0;
    for (k = 0; k < IN; ++k) x_data[i][k] = uniform();
    for (j = 0; j < 8; ++j) {
      double a = 0;
      for (k = 0; k < IN; ++k) a += u[j][k] * x_data[i][k];
      y += v[j] * tanh(a);
    }
    y_data[i] = y + 0.01 * uniform();
  }
}

int main(int argc, char **argv) {
  rr_comm_t comm;
  int rank, size, epochs = 20, epoch, step, i, j, k;
  const char *out = NULL;
  double w1[HID * IN + HID], w2[HID + 1]; /* weights: W1 then b1; W2 then b2 */
  double g1[L1], g2[L2], hidden[BATCH][HID], err[BATCH];
  const double lr = 0.05;

  for (i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--epochs") == 0 && i + 1 < argc) epochs = atoi(argv[++i]);
    else if (strcmp(argv[i], "--out") == 0 && i + 1 < argc) out = argv[++i];
    else {
      fprintf(stderr, "usage: %s [--epochs N] [--out FILE]\n", argv[0]);
      return 2;
    }
  }
  check(rr_comm_init_from_env(&comm), "rr_comm_init_from_env");
  rr_comm_rank(comm, &rank);
  rr_comm_size(comm, &size);
  if (BATCH % size != 0) {
    fprintf(stderr, "trainer: the global batch of %d does not split over %d ranks\n", BATCH, size);
    return 2;
  }
  make_data();

  /* Rank 0 initialises the weights and broadcasts them. */
  memset(w1, 0, sizeof w1);
  memset(w2, 0, sizeof w2);
  if (rank == 0) {
    for (i = 0; i < HID * IN; ++i) w1[i] = 0.5 * uniform();
    for (i = 0; i < HID; ++i) w2[i] = 0.5 * uniform();
  }
  check(rr_broadcast(comm, w1, L1, RR_FLOAT64, 0, NULL), "broadcast W1");
  check(rr_broadcast(comm, w2, L2, RR_FLOAT64, 0, NULL), "broadcast W2");

  for (epoch = 0; epoch < epochs; ++epoch) {
    double loss = 0;
    for (step = 0; step < SAMPLES / BATCH; ++step) {
      const int shard = BATCH / size, first = step * BATCH + rank * shard;
      rr_request_t req2, req1;
      double local = 0;
      /* forward */
      for (i = 0; i < shard; ++i) {
        const double *x = x_data[first + i];
        double y = w2[HID];
        for (j = 0; j < HID; ++j) {
          double a = w1[HID * IN + j];
          for (k = 0; k < IN; ++k) a += w1[j * IN + k] * x[k];
          hidden[i][j] = tanh(a);
          y += w2[j] * hidden[i][j];
        }
        err[i] = y - y_data[first + i];
        local += 0.5 * err[i] * err[i] / shard;
      }
      /* backward, layer 2: its bucket leaves at once */
      memset(g2, 0, sizeof g2);
      for (i = 0; i < shard; ++i) {
        for (j = 0; j < HID; ++j) g2[j] += err[i] * hidden[i][j] / shard;
        g2[HID] += err[i] / shard;
      }
      check(rr_allreduce_async(comm, g2, g2, L2, RR_FLOAT64, RR_AVG, NULL, &req2), "all-reduce layer 2");
      /* backward, layer 1, while layer 2's bucket is on the ring */
      memset(g1, 0, sizeof g1);
      for (i = 0; i < shard; ++i) {
        for (j = 0; j < HID; ++j) {
          const double d = err[i] * w2[j] * (1.0 - hidden[i][j] * hidden[i][j]) / shard;
          for (k = 0; k < IN; ++k) g1[j * IN + k] += d * x_data[first + i][k];
          g1[HID * IN + j] += d;
        }
      }
      check(rr_allreduce_async(comm, g1, g1, L1, RR_FLOAT64, RR_AVG, NULL, &req1), "all-reduce layer 1");
      /* both buckets must be in before the optimizer step */
      check(rr_wait(req2), "wait layer 2");
      check(rr_wait(req1), "wait layer 1");
      rr_request_free(req2);
      rr_request_free(req1);
      for (i = 0; i < L1; ++i) w1[i] -= lr * g1[i];
      for (i = 0; i < L2; ++i) w2[i] -= lr * g2[i];
      check(rr_allreduce(comm, &local, &local, 1, RR_FLOAT64, RR_AVG, NULL), "loss");
      loss += local / (SAMPLES / BATCH);
    }
    if (rank == 0) printf("epoch %d loss %.6f\n", epoch, loss);
  }
  if (rank == 0 && out != NULL) {
    FILE *f = fopen(out, "wb");
    if (f == NULL || fwrite(w1, sizeof w1, 1, f) != 1 || fwrite(w2, sizeof w2, 1, f) != 1) {
      fprintf(stderr, "trainer: cannot write %s\n", out);
      return 1;
    }
    fclose(f);
  }
  check(rr_comm_destroy(comm), "rr_comm_destroy");
  return 0;
}
