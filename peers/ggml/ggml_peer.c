/*
 * ggml-peer: ggml's reference quantizers and dequantizers (ggml-quants.c, compiled
 * unchanged from the llama.cpp sources) behind a two-command interface, as an independent
 * peer for safetensors-node's codec tests. Built by peers/ggml/build.mjs.
 *
 *   ggml-peer quantize   TYPE IN.f32 OUT.bin   quantize_row_<type>_ref over the whole input
 *   ggml-peer dequantize TYPE IN.bin OUT.f32   dequantize_row_<type>
 *   ggml-peer types                            the types each command knows
 *
 * Inputs must be whole blocks. Exit status 2 on usage errors, 1 on I/O errors.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml-quants.h"

/* The few ggml.c functions ggml-quants.c refers to (only reached by code paths the driver
 * does not use: the row-size helpers of the imatrix quantizers and error reports). */
void ggml_abort(const char * file, int line, const char * fmt, ...) {
    fprintf(stderr, "ggml_abort at %s:%d (%s)\n", file, line, fmt);
    abort();
}
size_t ggml_type_size(enum ggml_type type) { (void) type; abort(); }
size_t ggml_row_size(enum ggml_type type, int64_t ne) { (void) type; (void) ne; abort(); }
const char * ggml_type_name(enum ggml_type type) { (void) type; return "?"; }

typedef void (*quantize_fn)(const float *, void *, int64_t);
typedef void (*dequantize_fn)(const void *, float *, int64_t);

struct codec {
    const char * name;
    int block;       /* values per block */
    int bytes;       /* bytes per block */
    quantize_fn quantize;
    dequantize_fn dequantize;
};

#define Q(f) ((quantize_fn) (f))
#define D(f) ((dequantize_fn) (f))

static const struct codec CODECS[] = {
    { "Q4_0",    32,  18, Q(quantize_row_q4_0_ref),  D(dequantize_row_q4_0)    },
    { "Q4_1",    32,  20, Q(quantize_row_q4_1_ref),  D(dequantize_row_q4_1)    },
    { "Q5_0",    32,  22, Q(quantize_row_q5_0_ref),  D(dequantize_row_q5_0)    },
    { "Q5_1",    32,  24, Q(quantize_row_q5_1_ref),  D(dequantize_row_q5_1)    },
    { "Q8_0",    32,  34, Q(quantize_row_q8_0_ref),  D(dequantize_row_q8_0)    },
    { "Q2_K",   256,  84, Q(quantize_row_q2_K_ref),  D(dequantize_row_q2_K)    },
    { "Q3_K",   256, 110, Q(quantize_row_q3_K_ref),  D(dequantize_row_q3_K)    },
    { "Q4_K",   256, 144, Q(quantize_row_q4_K_ref),  D(dequantize_row_q4_K)    },
    { "Q5_K",   256, 176, Q(quantize_row_q5_K_ref),  D(dequantize_row_q5_K)    },
    { "Q6_K",   256, 210, Q(quantize_row_q6_K_ref),  D(dequantize_row_q6_K)    },
    { "Q8_K",   256, 292, Q(quantize_row_q8_K_ref),  D(dequantize_row_q8_K)    },
    { "Q1_0",   128,  18, Q(quantize_row_q1_0_ref),  D(dequantize_row_q1_0)    },
    { "Q2_0",    64,  18, Q(quantize_row_q2_0_ref),  D(dequantize_row_q2_0)    },
    { "TQ1_0",  256,  54, Q(quantize_row_tq1_0_ref), D(dequantize_row_tq1_0)   },
    { "TQ2_0",  256,  66, Q(quantize_row_tq2_0_ref), D(dequantize_row_tq2_0)   },
    { "MXFP4",   32,  17, Q(quantize_row_mxfp4_ref), D(dequantize_row_mxfp4)   },
    { "NVFP4",   64,  36, Q(quantize_row_nvfp4_ref), D(dequantize_row_nvfp4)   },
    { "IQ2_XXS", 256, 66, NULL,                      D(dequantize_row_iq2_xxs) },
    { "IQ2_XS",  256, 74, NULL,                      D(dequantize_row_iq2_xs)  },
    { "IQ2_S",   256, 82, NULL,                      D(dequantize_row_iq2_s)   },
    { "IQ3_XXS", 256, 98, NULL,                      D(dequantize_row_iq3_xxs) },
    { "IQ3_S",  256, 110, NULL,                      D(dequantize_row_iq3_s)   },
    { "IQ1_S",   256, 50, NULL,                      D(dequantize_row_iq1_s)   },
    { "IQ1_M",   256, 56, NULL,                      D(dequantize_row_iq1_m)   },
    { "IQ4_NL",   32, 18, NULL,                      D(dequantize_row_iq4_nl)  },
    { "IQ4_XS",  256, 136, NULL,                     D(dequantize_row_iq4_xs)  },
};

static const struct codec * find(const char * name) {
    for (size_t i = 0; i < sizeof(CODECS) / sizeof(CODECS[0]); i++) {
        if (strcmp(CODECS[i].name, name) == 0) return &CODECS[i];
    }
    return NULL;
}

static void * read_all(const char * path, size_t * len) {
    FILE * f = fopen(path, "rb");
    if (!f) { perror(path); exit(1); }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    void * buf = malloc(n > 0 ? (size_t) n : 1);
    if (!buf || fread(buf, 1, (size_t) n, f) != (size_t) n) { perror(path); exit(1); }
    fclose(f);
    *len = (size_t) n;
    return buf;
}

static void write_all(const char * path, const void * buf, size_t len) {
    FILE * f = fopen(path, "wb");
    if (!f || fwrite(buf, 1, len, f) != len || fclose(f) != 0) { perror(path); exit(1); }
}

int main(int argc, char ** argv) {
    if (argc == 2 && strcmp(argv[1], "types") == 0) {
        for (size_t i = 0; i < sizeof(CODECS) / sizeof(CODECS[0]); i++) {
            printf("%s %d %d %s\n", CODECS[i].name, CODECS[i].block, CODECS[i].bytes,
                   CODECS[i].quantize ? "quantize,dequantize" : "dequantize");
        }
        return 0;
    }
    if (argc != 5) {
        fprintf(stderr, "usage: ggml-peer quantize|dequantize TYPE IN OUT | ggml-peer types\n");
        return 2;
    }
    const struct codec * c = find(argv[2]);
    if (!c) { fprintf(stderr, "unknown type %s\n", argv[2]); return 2; }
    size_t len;
    void * in = read_all(argv[3], &len);
    if (strcmp(argv[1], "quantize") == 0 && c->quantize) {
        size_t n = len / sizeof(float);
        if (len % sizeof(float) || n % (size_t) c->block) { fprintf(stderr, "not whole blocks\n"); return 2; }
        size_t out_len = n / (size_t) c->block * (size_t) c->bytes;
        void * out = malloc(out_len ? out_len : 1);
        c->quantize((const float *) in, out, (int64_t) n);
        write_all(argv[4], out, out_len);
    } else if (strcmp(argv[1], "dequantize") == 0) {
        if (len % (size_t) c->bytes) { fprintf(stderr, "not whole blocks\n"); return 2; }
        size_t n = len / (size_t) c->bytes * (size_t) c->block;
        float * out = malloc(n ? n * sizeof(float) : 1);
        c->dequantize(in, out, (int64_t) n);
        write_all(argv[4], out, n * sizeof(float));
    } else {
        fprintf(stderr, "%s: not available for %s\n", argv[1], argv[2]);
        return 2;
    }
    return 0;
}
