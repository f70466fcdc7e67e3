// --json-schema FILE / --json-object / --grammar FILE, shared by g4 generate and g4 bench.
#pragma once
#include <memory>

#include "cli/args.h"
#include "engine/grammar_matcher.h"
#include "text/tokenizer.h"

namespace g4::cli {

// True when the arguments ask for an output grammar; throws g4::Error when more than one of the
// three flags is given.
bool wants_output_grammar(const Args& a);

// The grammar the flags name, bound to the tokenizer. Errors name the file and, for a schema, the
// keyword's path; for GBNF, line and column.
std::shared_ptr<grammar::CompiledGrammar> compile_output_grammar(const Args& a, const text::Tokenizer& tok);

}  // namespace g4::cli
