#include "source.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

namespace loom::gguf {

bool Source::read(void * dst, uint64_t n) {
    if (n > remaining()) {
        return false;
    }
    if (n == 0) {
        return true;
    }
    if (!read_at(pos_, dst, n)) {
        return false;
    }
    pos_ += n;
    return true;
}

bool Source::seek(uint64_t pos) {
    if (pos > size_) {
        return false;
    }
    pos_ = pos;
    return true;
}

bool MemorySource::read_at(uint64_t pos, void * dst, uint64_t n) {
    std::memcpy(dst, data_ + pos, n);
    return true;
}

std::unique_ptr<FileSource> FileSource::open(const char * path, std::string * error) {
    std::FILE * f = std::fopen(path, "rb");
    if (f == nullptr) {
        *error = std::strerror(errno);
        return nullptr;
    }
    // The size must be known before parsing, and only a regular file has a
    // meaningful one (a pipe or device would make every length check moot).
    struct stat st {};
    if (fstat(fileno(f), &st) != 0) {
        *error = std::strerror(errno);
        std::fclose(f);
        return nullptr;
    }
    if (!S_ISREG(st.st_mode)) {
        *error = "not a regular file";
        std::fclose(f);
        return nullptr;
    }
    return std::unique_ptr<FileSource>(new FileSource(f, uint64_t(st.st_size)));
}

FileSource::~FileSource() {
    std::fclose(file_);
}

bool FileSource::read_at(uint64_t pos, void * dst, uint64_t n) {
    if (pos != file_pos_) {
        if (pos > uint64_t(INT64_MAX) || fseeko(file_, off_t(pos), SEEK_SET) != 0) {
            return false;
        }
        file_pos_ = pos;
    }
    // fread takes size_t; large tensor blobs are read in pieces so that a
    // short read is noticed at the piece where it happens.
    auto *             out   = static_cast<uint8_t *>(dst);
    constexpr uint64_t piece = uint64_t(1) << 30;
    while (n > 0) {
        const size_t want = size_t(n < piece ? n : piece);
        const size_t got  = std::fread(out, 1, want, file_);
        file_pos_ += got;
        if (got != want) {
            return false; // the file shrank or an I/O error occurred
        }
        out += got;
        n -= got;
    }
    return true;
}

bool CallbackSource::read_at(uint64_t pos, void * dst, uint64_t n) {
    auto * out = static_cast<uint8_t *>(dst);
    while (n > 0) {
        const size_t want = size_t(n < max_chunk_ ? n : max_chunk_);
        const size_t got  = cb_(userdata_, out, base_ + pos, want);
        if (got != want) {
            return false;
        }
        out += got;
        pos += got;
        n -= got;
    }
    return true;
}

} // namespace loom::gguf
