// safetensors: the tensor file format of Hugging Face's safetensors library,
// written and read here without it (docs/torch.md). A file is an 8-byte
// little-endian header length N, N bytes of JSON, then the tensors' bytes:
//
//   {"__metadata__": {"case": "gpt2", ...},             strings only
//    "wte.weight": {"dtype": "F32", "shape": [512, 64], "data_offsets": [0, 131072]},
//    ...}
//
// data_offsets are [begin, end) into the bytes after the header; the
// tensors are little-endian, row-major, packed one after another in the
// order given, without holes. The header is padded with spaces to a
// multiple of 8 bytes, so every tensor starts 8-byte aligned when loaded.
//
//   st_tensor t[] = {{"w", "F32", 2, {3, 4}, data, 48}};
//   safetensors_write("m.safetensors", t, 1, meta, nmeta, err, sizeof err);
//   st_file *f;
//   safetensors_read("m.safetensors", &f, err, sizeof err);
//   const st_tensor *w = safetensors_find(f, "w");    // w->data points into f
//   safetensors_free(f);
//
// dtype strings are the format's: F64, F32, F16, BF16, I64, I32, I16, I8,
// U8, BOOL.
#pragma once
#include <stddef.h>
#include <stdint.h>

#define ST_MAX_DIMS 8

typedef struct st_tensor {
    const char *name;
    const char *dtype;
    int ndim;
    int64_t shape[ST_MAX_DIMS];
    const void *data;
    size_t bytes; // numel times the dtype's size
} st_tensor;

typedef struct st_file {
    st_tensor *tensors; // in the file's data order
    int n;
    char **meta; // key, value, key, value ...
    int nmeta;   // pairs
    void *blob;  // the whole file
    size_t size;
} st_file;

// The element size of a dtype string, 0 when it is not one of the format's.
size_t safetensors_dtype_size(const char *dtype);

// Writes the tensors (names unique, bytes matching dtype and shape) and the
// metadata pairs (meta[2i] key, meta[2i + 1] value) to path, through a
// temporary file renamed into place; 0, or -1 with err naming the path and
// the failed call or the bad tensor.
int safetensors_write(const char *path, const st_tensor *t, int n, const char *const *meta,
                      int nmeta, char *err, size_t cap);

// Reads and checks a whole file: header length within the file, JSON an
// object, every entry's dtype known, its shape's size matching its
// offsets, the offsets in order, without holes or overlap, ending at the
// file's end. 0, or -1 with err naming the path and what is wrong.
int safetensors_read(const char *path, st_file **out, char *err, size_t cap);
const st_tensor *safetensors_find(const st_file *f, const char *name);
const char *safetensors_meta(const st_file *f, const char *key);
void safetensors_free(st_file *f);
