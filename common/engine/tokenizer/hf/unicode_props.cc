// ICU-backed Unicode properties and normalization (see unicode_props.h).
#include "common/engine/tokenizer/hf/unicode_props.h"

#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>

#include "absl/strings/str_cat.h"
#include "common/engine/tokenizer/utf8.h"

namespace splitspec::engine::hf {

uint32_t GeneralCategoryMaskOf(char32_t c) { return U_GET_GC_MASK(static_cast<UChar32>(c)); }

uint32_t GeneralCategoryMaskByName(std::string_view name) {
  struct Entry {
    const char* name;
    uint32_t mask;
  };
  static constexpr Entry kEntries[] = {
      {"L", U_GC_L_MASK},   {"Lu", U_GC_LU_MASK}, {"Ll", U_GC_LL_MASK}, {"Lt", U_GC_LT_MASK},
      {"Lm", U_GC_LM_MASK}, {"Lo", U_GC_LO_MASK}, {"M", U_GC_M_MASK},   {"Mn", U_GC_MN_MASK},
      {"Mc", U_GC_MC_MASK}, {"Me", U_GC_ME_MASK}, {"N", U_GC_N_MASK},   {"Nd", U_GC_ND_MASK},
      {"Nl", U_GC_NL_MASK}, {"No", U_GC_NO_MASK}, {"P", U_GC_P_MASK},   {"Pc", U_GC_PC_MASK},
      {"Pd", U_GC_PD_MASK}, {"Ps", U_GC_PS_MASK}, {"Pe", U_GC_PE_MASK}, {"Pi", U_GC_PI_MASK},
      {"Pf", U_GC_PF_MASK}, {"Po", U_GC_PO_MASK}, {"S", U_GC_S_MASK},   {"Sm", U_GC_SM_MASK},
      {"Sc", U_GC_SC_MASK}, {"Sk", U_GC_SK_MASK}, {"So", U_GC_SO_MASK}, {"Z", U_GC_Z_MASK},
      {"Zs", U_GC_ZS_MASK}, {"Zl", U_GC_ZL_MASK}, {"Zp", U_GC_ZP_MASK}, {"C", U_GC_C_MASK},
      {"Cc", U_GC_CC_MASK}, {"Cf", U_GC_CF_MASK}, {"Cs", U_GC_CS_MASK}, {"Co", U_GC_CO_MASK},
      {"Cn", U_GC_CN_MASK},
  };
  for (const Entry& e : kEntries) {
    if (name == e.name) return e.mask;
  }
  return 0;
}

bool IsWhiteSpace(char32_t c) { return u_isUWhiteSpace(static_cast<UChar32>(c)); }

char32_t FoldCase(char32_t c) {
  return static_cast<char32_t>(u_foldCase(static_cast<UChar32>(c), U_FOLD_CASE_DEFAULT));
}

absl::StatusOr<std::string> Normalize(NormalForm form, std::string_view text) {
  UErrorCode error = U_ZERO_ERROR;
  const icu::Normalizer2* normalizer = nullptr;
  switch (form) {
    case NormalForm::kNfc: normalizer = icu::Normalizer2::getNFCInstance(error); break;
    case NormalForm::kNfd: normalizer = icu::Normalizer2::getNFDInstance(error); break;
    case NormalForm::kNfkc: normalizer = icu::Normalizer2::getNFKCInstance(error); break;
    case NormalForm::kNfkd: normalizer = icu::Normalizer2::getNFKDInstance(error); break;
  }
  if (U_FAILURE(error)) return absl::InternalError(absl::StrCat("ICU normalizer: ", u_errorName(error)));
  // Plain ASCII is already in every form; skip the UTF-16 round trip for it.
  bool ascii = true;
  for (char ch : text) ascii = ascii && static_cast<unsigned char>(ch) < 0x80;
  if (ascii) return std::string(text);
  const icu::UnicodeString source =
      icu::UnicodeString::fromUTF8(icu::StringPiece(text.data(), static_cast<int32_t>(text.size())));
  icu::UnicodeString normalized = normalizer->normalize(source, error);
  if (U_FAILURE(error)) return absl::InvalidArgumentError(absl::StrCat("normalizing text: ", u_errorName(error)));
  std::string out;
  normalized.toUTF8String(out);
  return out;
}

std::vector<CodePoint> DecodeUtf8(std::string_view text) {
  std::vector<CodePoint> out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    size_t length = 1;
    const auto* s = reinterpret_cast<const unsigned char*>(text.data() + i);
    char32_t c = 0xFFFD;
    if (tokenizer_internal::DecodeValidUtf8Prefix(text.substr(i), &length)) {
      if (length == 1) {
        c = s[0];
      } else if (length == 2) {
        c = ((s[0] & 0x1Fu) << 6) | (s[1] & 0x3Fu);
      } else if (length == 3) {
        c = ((s[0] & 0x0Fu) << 12) | ((s[1] & 0x3Fu) << 6) | (s[2] & 0x3Fu);
      } else {
        c = ((s[0] & 0x07u) << 18) | ((s[1] & 0x3Fu) << 12) | ((s[2] & 0x3Fu) << 6) | (s[3] & 0x3Fu);
      }
    }
    out.push_back({c, static_cast<uint32_t>(i)});
    i += length;
  }
  return out;
}

void AppendUtf8(char32_t c, std::string* out) {
  if (c < 0x80) {
    out->push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (c >> 6)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (c >> 12)));
    out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (c >> 18)));
    out->push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

}  // namespace splitspec::engine::hf
