#pragma once

// Sequential byte sources the GGUF reader parses: a file or a caller's
// memory. Both know their total size up front, so the reader can compare
// every length a header claims with the bytes that actually remain.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

namespace loom::gguf {

class Source {
public:
    virtual ~Source() = default;

    uint64_t size() const { return size_; }
    uint64_t position() const { return pos_; }
    uint64_t remaining() const { return size_ - pos_; }

    // Reads n bytes at the current position; false (position unchanged) when
    // fewer than n remain or the read fails.
    bool read(void * dst, uint64_t n);
    // Moves to an absolute position no greater than size().
    bool seek(uint64_t pos);

protected:
    explicit Source(uint64_t size) : size_(size) {}
    virtual bool read_at(uint64_t pos, void * dst, uint64_t n) = 0;

private:
    uint64_t size_;
    uint64_t pos_ = 0;
};

class MemorySource final : public Source {
public:
    MemorySource(const void * data, uint64_t size) : Source(size), data_(static_cast<const uint8_t *>(data)) {}

private:
    bool read_at(uint64_t pos, void * dst, uint64_t n) override;

    const uint8_t * data_;
};

class FileSource final : public Source {
public:
    // Opens a regular file for reading; NULL with *error set otherwise.
    static std::unique_ptr<FileSource> open(const char * path, std::string * error);
    ~FileSource() override;

    FileSource(const FileSource &)             = delete;
    FileSource & operator=(const FileSource &) = delete;

private:
    FileSource(std::FILE * file, uint64_t size) : Source(size), file_(file) {}
    bool read_at(uint64_t pos, void * dst, uint64_t n) override;

    std::FILE * file_;
    uint64_t    file_pos_ = 0; // where the stream is, to seek only when the reader jumps
};

// Bytes through a caller's function: offsets from base, at most max_chunk
// bytes a call; a short read is the end of the data.
class CallbackSource final : public Source {
public:
    using Callback = size_t (*)(void * userdata, void * output, uint64_t offset, size_t len);
    CallbackSource(Callback cb, void * userdata, size_t max_chunk, uint64_t size, uint64_t base = 0)
        : Source(size), cb_(cb), userdata_(userdata), max_chunk_(max_chunk == 0 ? SIZE_MAX : max_chunk), base_(base) {}

private:
    bool read_at(uint64_t pos, void * dst, uint64_t n) override;

    Callback cb_;
    void *   userdata_;
    size_t   max_chunk_;
    uint64_t base_;
};

} // namespace loom::gguf
