// Plugins and the registry: loading the test device, every way a library
// can be refused, directory searches, GGML_BACKEND_PATH, unloading.

#include <gtest/gtest.h>

#include <cstdlib>
#include <ostream>
#include <string>

#include "backend_test_helpers.h"
#include "ggml-backend.h"
#include "ggml-cpp.h"

using namespace loomtest;

namespace {

class BackendLoader : public ::testing::Test {
  protected:
    void SetUp() override {
        reg_ = testdev_reg();
        ASSERT_NE(reg_, nullptr) << "cannot load " << LOOM_TESTDEV_PATH;
        testdev_reset();
        dev0_ = ggml_backend_dev_by_name("TestDev0");
        dev1_ = ggml_backend_dev_by_name("TestDev1");
        ASSERT_NE(dev0_, nullptr);
        ASSERT_NE(dev1_, nullptr);
    }

    ggml_backend_reg_t testdev() const { return reg_; }

    ggml_backend_reg_t reg_  = nullptr;
    ggml_backend_dev_t dev0_ = nullptr;
    ggml_backend_dev_t dev1_ = nullptr;
};

// Threadsafe death tests re-execute the program, so the child starts with
// nothing loaded and the environment not yet read.
void use_threadsafe_death_tests() {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
}

} // namespace

TEST_F(BackendLoader, PluginRegistersItsDevices) {
    EXPECT_STREQ(ggml_backend_reg_name(testdev()), "TestDev");
    EXPECT_EQ(ggml_backend_reg_dev_count(testdev()), 2u);
    EXPECT_EQ(ggml_backend_reg_by_name("testdev"), testdev()); // names compare case-insensitively
    EXPECT_EQ(ggml_backend_dev_by_name("testdev1"), dev1_);
    EXPECT_EQ(ggml_backend_dev_backend_reg(dev0_), testdev());
    EXPECT_EQ(ggml_backend_dev_type(dev0_), GGML_BACKEND_DEVICE_TYPE_GPU);

    const size_t regs = ggml_backend_reg_count();
    const size_t devs = ggml_backend_dev_count();
    EXPECT_EQ(ggml_backend_load(LOOM_TESTDEV_PATH), testdev()); // again: the same reg, nothing added
    EXPECT_EQ(ggml_backend_reg_count(), regs);
    EXPECT_EQ(ggml_backend_dev_count(), devs);

    // The registry lists it with every other device, and init_best prefers a GPU.
    bool listed = false;
    for (size_t i = 0; i < ggml_backend_dev_count(); ++i) {
        listed = listed || ggml_backend_dev_get(i) == dev0_;
    }
    EXPECT_TRUE(listed);
    ggml_backend_ptr best(ggml_backend_init_best());
    ASSERT_NE(best, nullptr);
    EXPECT_EQ(ggml_backend_dev_type(ggml_backend_get_device(best.get())), GGML_BACKEND_DEVICE_TYPE_GPU);
    ggml_backend_ptr by_name(ggml_backend_init_by_name("TESTDEV1", nullptr));
    ASSERT_NE(by_name, nullptr);
    EXPECT_EQ(ggml_backend_get_device(by_name.get()), dev1_);
    EXPECT_STREQ(ggml_backend_name(by_name.get()), "TestDev1");
}

struct BadPlugin {
    const char * path;
    const char * reason; // expected in the log
};

void PrintTo(const BadPlugin & p, std::ostream * os) {
    *os << p.path;
}

class BadPlugins : public BackendLoader, public ::testing::WithParamInterface<BadPlugin> {};

TEST_P(BadPlugins, ReturnNullWithAReasonAndLeaveTheRegistryAlone) {
    const BadPlugin & bad  = GetParam();
    const size_t      regs = ggml_backend_reg_count();
    const size_t      devs = ggml_backend_dev_count();
    LogCapture        log;
    EXPECT_EQ(ggml_backend_load(bad.path), nullptr);
    EXPECT_TRUE(log.contains(bad.path)) << log.text();
    EXPECT_TRUE(log.contains(bad.reason)) << log.text();
    EXPECT_EQ(ggml_backend_reg_count(), regs);
    EXPECT_EQ(ggml_backend_dev_count(), devs);
}

const BadPlugin k_bad_plugins[] = {
    {"/nonexistent/libloom-missing.so", "No such file"},
    {LOOM_GARBAGE_PLUGIN_PATH, "cannot load"},
    {LOOM_NOENTRY_PLUGIN_PATH, "does not export ggml_backend_init"},
    {LOOM_BADVERSION_PLUGIN_PATH, "API version"},
    {LOOM_NULLINIT_PLUGIN_PATH, "returned NULL"},
    {LOOM_ZEROSCORE_PLUGIN_PATH, "cannot run on this machine"},
    {LOOM_NOTLOOM_PLUGIN_PATH, "loom_backend_api_version"},
    {LOOM_TESTDEV_COPY_PATH, "already registered"},
};

std::string bad_plugin_name(const ::testing::TestParamInfo<BadPlugin> & info) {
    static const char * const names[] = {"Missing",   "NotElf",    "NoEntryPoint", "WrongApiVersion",
                                         "InitFails", "ScoreZero", "NotLoom",      "SameFamilyTwice"};
    return names[info.index];
}

INSTANTIATE_TEST_SUITE_P(Loader, BadPlugins, ::testing::ValuesIn(k_bad_plugins), bad_plugin_name);

TEST_F(BackendLoader, LoadAllSkipsBadLibraries) {
    const size_t regs = ggml_backend_reg_count();
    const size_t devs = ggml_backend_dev_count();
    {
        LogCapture log;
        ggml_backend_load_all_from_path(LOOM_BAD_PLUGIN_DIR);
        EXPECT_TRUE(log.contains("libloom-garbage.so")) << log.text();
    }
    ggml_backend_load_all_from_path("/nonexistent/directory");
    EXPECT_EQ(ggml_backend_reg_count(), regs);
    EXPECT_EQ(ggml_backend_dev_count(), devs);
    // The directory of the test device: already registered, so nothing changes either.
    ggml_backend_load_all_from_path(LOOM_TESTDEV_DIR);
    EXPECT_EQ(ggml_backend_reg_count(), regs);
}

TEST_F(BackendLoader, UnloadRemovesTheFamilyAndReloadBringsItBack) {
    const size_t regs = ggml_backend_reg_count();
    const size_t devs = ggml_backend_dev_count();
    ggml_backend_unload(testdev());
    EXPECT_EQ(ggml_backend_reg_count(), regs - 1);
    EXPECT_EQ(ggml_backend_dev_count(), devs - 2);
    EXPECT_EQ(ggml_backend_reg_by_name("TestDev"), nullptr);
    EXPECT_EQ(ggml_backend_dev_by_name("TestDev0"), nullptr);
    {
        // The reg is gone: a second unload is reported, not acted on.
        LogCapture log;
        ggml_backend_unload(reg_);
        EXPECT_TRUE(log.contains("not registered")) << log.text();
    }
    EXPECT_EQ(ggml_backend_reg_count(), regs - 1);

    // The directory search finds it again.
    ggml_backend_load_all_from_path(LOOM_TESTDEV_DIR);
    ASSERT_NE(ggml_backend_reg_by_name("TestDev"), nullptr);
    EXPECT_EQ(ggml_backend_reg_count(), regs);
    EXPECT_EQ(ggml_backend_dev_count(), devs);
    ggml_backend_ptr b(ggml_backend_init_by_name("TestDev0", nullptr));
    EXPECT_NE(b, nullptr);
}

// GGML_BACKEND_PATH is read once per process, so each case runs in a fresh
// child process that sets it before the loader's first use.
TEST(BackendPath, DirectoryIsSearched) {
    use_threadsafe_death_tests();
    EXPECT_EXIT(
        {
            setenv("GGML_BACKEND_PATH", "/nonexistent:" LOOM_TESTDEV_DIR, 1);
            ggml_backend_load_all();
            std::exit(ggml_backend_dev_by_name("TestDev0") != nullptr ? 0 : 1);
        },
        ::testing::ExitedWithCode(0), "");
}

TEST(BackendPath, FileIsLoaded) {
    use_threadsafe_death_tests();
    EXPECT_EXIT(
        {
            setenv("GGML_BACKEND_PATH", LOOM_TESTDEV_PATH, 1);
            ggml_backend_load_all();
            std::exit(ggml_backend_reg_by_name("TestDev") != nullptr ? 0 : 1);
        },
        ::testing::ExitedWithCode(0), "");
}

TEST(BackendPath, NeverLoadedByDefault) {
    use_threadsafe_death_tests();
    EXPECT_EXIT(
        {
            unsetenv("GGML_BACKEND_PATH");
            ggml_backend_load_all();
            std::exit(ggml_backend_reg_by_name("TestDev") == nullptr ? 0 : 1);
        },
        ::testing::ExitedWithCode(0), "");
}
