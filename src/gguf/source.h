#pragma once

// Sequential byte sources the GGUF reader parses: a file or a caller's
// memory. Both know their total size up front, so the reader can compare
// every length a header claims with the bytes that actually remain.

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

} // namespace loom::gguf
