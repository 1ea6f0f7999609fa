// The gradient column of the operator rows (k_op_grad in src/core/op_table.h)
// against the rules themselves: an operator has a case of its own in
// Builder::backward or Builder::train_op (src/core/autodiff_rules.cpp) iff
// its row says it has a gradient, and a unary operator has a case of its own
// in Builder::unary iff its row says so. The rules are read from the source
// file: each of these switches lists every operator, those without a rule
// grouped under one label (backward's hands them to train_op, train_op's and
// unary's refuse them), so a rule is a label outside that group.

#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "core/op_table.h"

namespace {

std::string read_rules() {
    std::ifstream in(LOOM_AUTODIFF_RULES);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

// The body of the function whose definition starts with head, up to the
// next function definition at the start of a line.
std::string function_body(const std::string & src, const std::string & head) {
    const size_t at = src.find(head);
    if (at == std::string::npos) {
        return {};
    }
    const size_t end = src.find("\n}\n", at);
    return src.substr(at, end == std::string::npos ? std::string::npos : end - at);
}

// The enumerators with prefix that have a case of their own in body: each
// group of consecutive labels with the statements after it; a group whose
// statements contain one of the markers of "no rule" is left out.
std::set<std::string> labels_with_rules(const std::string & body, const std::string & prefix,
                                        const std::vector<std::string> & no_rule) {
    std::set<std::string> out;
    const std::regex      label("case (" + prefix + "[A-Z0-9_]+):");
    std::vector<std::pair<size_t, std::string>> labels; // position after the label, name
    for (auto it = std::sregex_iterator(body.begin(), body.end(), label); it != std::sregex_iterator(); ++it) {
        labels.emplace_back(size_t(it->position(0) + it->length(0)), (*it)[1].str());
    }
    std::vector<std::string> group;
    for (size_t i = 0; i < labels.size(); ++i) {
        group.push_back(labels[i].second);
        const size_t next  = i + 1 < labels.size() ? labels[i + 1].first - labels[i + 1].second.size() - 6
                                                   : body.size();
        std::string  stmts = body.substr(labels[i].first, next - labels[i].first);
        if (stmts.find_first_not_of(" \t\n") == std::string::npos) {
            continue; // the next label belongs to the same group
        }
        bool rule = true;
        for (const std::string & m : no_rule) {
            rule = rule && stmts.find(m) == std::string::npos;
        }
        if (rule) {
            out.insert(group.begin(), group.end());
        }
        group.clear();
    }
    return out;
}

TEST(AutodiffRows, GradientColumnMatchesTheRules) {
    const std::string src = read_rules();
    ASSERT_FALSE(src.empty()) << "cannot read " << LOOM_AUTODIFF_RULES;
    const std::string backward = function_body(src, "void Builder::backward(");
    const std::string train    = function_body(src, "void Builder::train_op(");
    ASSERT_FALSE(backward.empty());
    ASSERT_FALSE(train.empty());
    std::set<std::string> rules = labels_with_rules(backward, "GGML_OP_", {"train_op("});
    for (const std::string & op : labels_with_rules(train, "GGML_OP_", {"no gradient for %s"})) {
        rules.insert(op);
    }
    rules.erase("GGML_OP_NONE"); // a leaf: nothing to do, no rule
    rules.erase("GGML_OP_COUNT");
    for (const loom::OpInfo & o : loom::k_ops) {
        const std::string name = std::string("GGML_OP_") + o.name;
        EXPECT_EQ((o.flags & loom::k_op_grad) != 0, rules.count(name) == 1)
            << name << ": the row's gradient column and autodiff_rules.cpp disagree";
    }
}

TEST(AutodiffRows, UnaryGradientColumnMatchesTheRules) {
    const std::string src   = read_rules();
    const std::string unary = function_body(src, "void Builder::unary(");
    ASSERT_FALSE(unary.empty());
    std::set<std::string> rules = labels_with_rules(unary, "GGML_UNARY_OP_", {"without a gradient"});
    rules.erase("GGML_UNARY_OP_COUNT");
    for (const loom::UnaryInfo & u : loom::k_unary_ops) {
        const std::string name = std::string("GGML_UNARY_OP_") + u.name;
        EXPECT_EQ((u.flags & loom::k_op_grad) != 0, rules.count(name) == 1)
            << name << ": the row's gradient column and autodiff_rules.cpp disagree";
    }
}

} // namespace
