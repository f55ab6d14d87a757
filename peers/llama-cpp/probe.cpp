// Test glue around libllama: what llama.cpp makes of a GGUF, printed deterministically
// (llama.cpp's own tools print through an asynchronous logger whose last lines can be lost
// when stdout is a pipe). Built against the cached llama.cpp by scripts/peers/llama-cpp.mjs.
//
//   llama-probe tokenize MODEL.gguf      texts on stdin, separated by NUL bytes; prints a JSON
//                                        list of token-id lists (special tokens added as the
//                                        GGUF says, special-token text not parsed)
//   llama-probe embed MODEL.gguf         texts as above, one sequence each; prints
//                                        {"n_embd": N, "embeddings": [[...], ...]}, each the
//                                        model's pooled embedding (not normalised)
//   llama-probe logits MODEL.gguf IDS OUT.f32
//                                        IDS: comma-separated token ids evaluated as one
//                                        sequence from position 0; writes n_tokens × n_vocab
//                                        float32 logits (little endian, row by row) to OUT.f32
//                                        and prints {"n_tokens": N, "n_vocab": V}
//   llama-probe logits MODEL.gguf IDS OUT.f32 LORA.gguf
//                                        the same with a GGUF LoRA adapter applied at scale 1
//                                        (llama_adapter_lora_init + llama_set_adapters_lora)
//
// Contexts evaluate in F32 throughout: an F32 KV cache (llama.cpp's default is F16) and no
// flash attention (its CPU kernel rounds Q to F16, ~1e-3 of the logits).
#include "llama.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

static void quiet(enum ggml_log_level level, const char * text, void *) {
    if (level >= GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

static int fail(const char * what) {
    fprintf(stderr, "llama-probe: %s\n", what);
    return 1;
}

static std::vector<std::string> read_texts() {
    std::string all((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
    std::vector<std::string> texts;
    size_t start = 0;
    for (size_t i = 0; i <= all.size(); ++i) {
        if (i == all.size() || all[i] == '\0') {
            if (i > start || i < all.size()) texts.push_back(all.substr(start, i - start));
            start = i + 1;
        }
    }
    return texts;
}

static bool tokenize(const llama_vocab * vocab, const std::string & text, std::vector<llama_token> & out) {
    int n = -llama_tokenize(vocab, text.data(), (int32_t) text.size(), nullptr, 0, true, false);
    out.resize((size_t) n);
    return llama_tokenize(vocab, text.data(), (int32_t) text.size(), out.data(), n, true, false) == n;
}

static llama_context * context(llama_model * model, uint32_t n_tokens, uint32_t n_seq, bool embeddings) {
    llama_context_params cp = llama_context_default_params();
    // One batch holds every token of every sequence, in one context shared by the sequences
    // (as llama-embedding sets it up: separate per-sequence contexts would split n_ctx).
    const uint32_t n = (n_tokens + 255) / 256 * 256;
    cp.n_ctx = n;
    cp.n_batch = n;
    cp.n_ubatch = n;
    cp.n_seq_max = embeddings ? (uint32_t) llama_max_parallel_sequences() : n_seq;
    cp.kv_unified = true;
    cp.n_threads = 2;
    cp.n_threads_batch = 2;
    cp.type_k = GGML_TYPE_F32;
    cp.type_v = GGML_TYPE_F32;
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    cp.embeddings = embeddings;
    return llama_init_from_model(model, cp);
}

int main(int argc, char ** argv) {
    if (argc < 3) return fail("usage: llama-probe tokenize|embed MODEL < texts | logits MODEL IDS OUT.f32");
    const std::string mode = argv[1];
    llama_log_set(quiet, nullptr);
    llama_backend_init();
    llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    llama_model * model = llama_model_load_from_file(argv[2], mp);
    if (!model) return fail("llama.cpp could not load the model");
    const llama_vocab * vocab = llama_model_get_vocab(model);

    if (mode == "tokenize") {
        printf("[");
        std::vector<std::string> texts = read_texts();
        for (size_t t = 0; t < texts.size(); ++t) {
            std::vector<llama_token> ids;
            if (!tokenize(vocab, texts[t], ids)) return fail("tokenization failed");
            printf("%s[", t ? "," : "");
            for (size_t i = 0; i < ids.size(); ++i) printf("%s%d", i ? "," : "", ids[i]);
            printf("]");
        }
        printf("]\n");
    } else if (mode == "embed") {
        std::vector<std::string> texts = read_texts();
        std::vector<std::vector<llama_token>> seqs(texts.size());
        uint32_t total = 0;
        for (size_t t = 0; t < texts.size(); ++t) {
            if (!tokenize(vocab, texts[t], seqs[t])) return fail("tokenization failed");
            total += (uint32_t) seqs[t].size();
        }
        llama_context * ctx = context(model, total, (uint32_t) texts.size(), true);
        if (!ctx) return fail("could not create a context");
        llama_batch_ext * batch = llama_batch_ext_init(ctx);
        for (size_t t = 0; t < seqs.size(); ++t) {
            for (size_t i = 0; i < seqs[t].size(); ++i) {
                const int32_t idx = llama_batch_ext_add_token(batch, (llama_seq_id) t, seqs[t][i]);
                if (idx < 0) return fail("could not add a token to the batch");
                const llama_pos pos = (llama_pos) i;
                llama_batch_ext_set_pos(batch, idx, &pos);
                llama_batch_ext_set_output_embd(batch, idx, true);
            }
        }
        const bool encoder = llama_model_has_encoder(model) || !llama_model_has_decoder(model);
        if (llama_process(ctx, encoder ? LLAMA_PROCESS_TYPE_ENCODE : LLAMA_PROCESS_TYPE_DECODE, batch) != 0) {
            return fail("evaluation failed");
        }
        const int n_embd = llama_model_n_embd(model);
        printf("{\"n_embd\": %d, \"embeddings\": [", n_embd);
        for (size_t t = 0; t < seqs.size(); ++t) {
            const float * e = llama_get_embeddings_seq(ctx, (llama_seq_id) t);
            if (!e) return fail("no pooled embedding (does the model have a pooling type?)");
            printf("%s[", t ? "," : "");
            for (int i = 0; i < n_embd; ++i) printf("%s%.9g", i ? "," : "", e[i]);
            printf("]");
        }
        printf("]}\n");
        llama_batch_ext_free(batch);
        llama_free(ctx);
    } else if (mode == "logits" && (argc == 5 || argc == 6)) {
        std::vector<llama_token> ids;
        for (const char * p = argv[3]; *p;) {
            char * end = nullptr;
            const long v = strtol(p, &end, 10);
            if (end == p) return fail("bad token ids");
            ids.push_back((llama_token) v);
            p = *end == ',' ? end + 1 : end;
        }
        if (ids.empty()) return fail("no token ids");
        llama_context * ctx = context(model, (uint32_t) ids.size(), 1, false);
        if (!ctx) return fail("could not create a context");
        if (argc == 6) {
            llama_adapter_lora * lora = llama_adapter_lora_init(model, argv[5]);
            if (!lora) return fail("llama.cpp could not load the LoRA adapter");
            float scale = 1.0f;
            if (llama_set_adapters_lora(ctx, &lora, 1, &scale) != 0) return fail("could not apply the LoRA adapter");
        }
        llama_batch_ext * batch = llama_batch_ext_init(ctx);
        for (size_t i = 0; i < ids.size(); ++i) {
            const int32_t idx = llama_batch_ext_add_token(batch, 0, ids[i]);
            if (idx < 0) return fail("could not add a token to the batch");
            const llama_pos pos = (llama_pos) i;
            llama_batch_ext_set_pos(batch, idx, &pos);
            llama_batch_ext_set_output_logits(batch, idx, true);
        }
        if (llama_process(ctx, LLAMA_PROCESS_TYPE_DECODE, batch) != 0) return fail("evaluation failed");
        const int n_vocab = llama_vocab_n_tokens(vocab);
        FILE * out = fopen(argv[4], "wb");
        if (!out) return fail("cannot write the output file");
        for (size_t i = 0; i < ids.size(); ++i) {
            const float * logits = llama_get_logits_ith(ctx, (int32_t) i);
            if (!logits) return fail("no logits for a position");
            fwrite(logits, sizeof(float), (size_t) n_vocab, out);
        }
        if (fclose(out) != 0) return fail("cannot write the output file");
        printf("{\"n_tokens\": %zu, \"n_vocab\": %d}\n", ids.size(), n_vocab);
        llama_batch_ext_free(batch);
        llama_free(ctx);
    } else {
        return fail("unknown mode");
    }
    fflush(stdout);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
